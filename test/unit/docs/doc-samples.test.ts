import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, test } from 'vitest'
import { parse as parseYaml } from 'yaml'
import { ConfigSchema } from '../../../src/config/schema.js'
import { docSamples } from '../../support/doc-samples.js'
import type { DocSample } from '../../support/doc-samples.js'

/**
 * Every TypeScript sample of the docs compiles against the package as a user imports it
 * (`sandbox-router`, `sandbox-router/conformance`, … mapped to the sources by package.json's exports),
 * under the project's strict compiler options: a sample naming a function the package does not export,
 * or calling it wrongly, fails here with the sample's file:line. Every YAML sample is checked against
 * the config schema. The docs are the top-level README.md, RELIABILITY.md and BENCHMARKS.md, every
 * Markdown file under docs/, and any README.md next to the code (src/**, providers/**).
 */
const ROOT = resolve(import.meta.dirname, '../../..')
/** The Markdown files under `dir` whose name `keep` accepts, as paths from the repository root. */
const markdownUnder = (dir: string, keep: (name: string) => boolean): string[] =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => keep(basename(f)) && !f.split(/[/\\]/).includes('node_modules'))
    .sort()
    .map((f) => join(dir, f))
const DOCS = [
  'README.md',
  'RELIABILITY.md',
  'BENCHMARKS.md',
  ...markdownUnder('docs', (f) => f.endsWith('.md')),
  ...markdownUnder('src', (f) => f === 'README.md'),
  ...markdownUnder('providers', (f) => f === 'README.md'),
]
const OUT = join(ROOT, '.sbx', 'doc-samples')

/** A sample's file as the diagnostics name it: its path from the repository root. */
const shown = (file: string): string => relative(ROOT, file)

/** `sandbox-router[/x]` → the source file behind the export's types (`./dist/src/a.d.ts` → `./src/a.ts`). */
function exportPaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    name: string
    exports: Record<string, { types: string }>
  }
  return Object.fromEntries(
    Object.entries(pkg.exports).map(([sub, e]) => [
      sub === '.' ? pkg.name : `${pkg.name}/${sub.slice(2)}`,
      [join(ROOT, e.types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts'))],
    ]),
  )
}

function compilerOptions(): ts.CompilerOptions {
  const read = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (p) => ts.sys.readFile(p))
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, ROOT)
  return { ...parsed.options, noEmit: true, declaration: false, sourceMap: false, paths: exportPaths() }
}

/** Compiles the samples, one module each; returns `file:line: message` per diagnostic in a sample. */
function compile(samples: DocSample[]): string[] {
  rmSync(OUT, { recursive: true, force: true })
  mkdirSync(OUT, { recursive: true })
  const files = new Map<string, { sample: DocSample; preludeLines: number }>()
  for (const s of samples) {
    const path = join(OUT, `${shown(s.file).replace(/\.md$/, '').replace(/[/\\]/g, '-')}-${s.line}.ts`)
    const prelude = s.prelude ? `${s.prelude}\n` : ''
    writeFileSync(path, `${prelude}${s.code}\nexport {}\n`)
    files.set(path, { sample: s, preludeLines: prelude ? prelude.split('\n').length - 1 : 0 })
  }
  const program = ts.createProgram([...files.keys()], compilerOptions())
  const problems: string[] = []
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const entry = d.file ? files.get(resolve(d.file.fileName)) : undefined
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n')
    if (!entry || !d.file || d.start === undefined) {
      problems.push(`(outside the samples) ${d.file?.fileName ?? ''}: ${message}`)
      continue
    }
    const { line } = d.file.getLineAndCharacterOfPosition(d.start)
    const where =
      line < entry.preludeLines
        ? `${shown(entry.sample.file)}:${entry.sample.line - 2} (prelude)`
        : `${shown(entry.sample.file)}:${entry.sample.line + line - entry.preludeLines}`
    problems.push(`${where}: ${message}`)
  }
  return problems
}

describe('the TypeScript samples of the docs', () => {
  test('every sample compiles against the package exports', () => {
    const samples = DOCS.flatMap((f) => docSamples(join(ROOT, f)))
    expect(samples.length).toBeGreaterThan(0)
    // the reference lives in docs/: its samples are compiled too, not only the top-level files'
    expect(samples.filter((s) => shown(s.file).startsWith('docs')).length).toBeGreaterThan(0)
    expect(compile(samples)).toEqual([])
  }, 120_000)

  test('every YAML sample is a valid config file (or part of one)', () => {
    const samples = DOCS.flatMap((f) => docSamples(join(ROOT, f), 'yaml'))
    expect(samples.filter((s) => shown(s.file).startsWith('docs')).length).toBeGreaterThan(0)
    const problems = samples.flatMap((s) => {
      const r = ConfigSchema.safeParse(parseYaml(s.code))
      return r.success
        ? []
        : r.error.issues.map((i) => `${shown(s.file)}:${s.line}: ${i.path.join('.')}: ${i.message}`)
    })
    expect(problems).toEqual([])
  })
})
