import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { expect, test } from 'vitest'

/**
 * The test tree's layout (test/README.md): one tier per folder, each tier's files import only the
 * sources, `test/support/` (every shared helper) and `test/fakes/` (the stand-in services) — never a
 * file of another tier, so a tier runs, moves and is read on its own.
 */
const ROOT = resolve(import.meta.dirname, '../../..')
const TEST = join(ROOT, 'test')
const TIERS = ['unit', 'integration', 'e2e', 'fault', 'disruptive', 'compose', 'live']
const SHARED = ['support', 'fakes']

/** Every relative module a file names (imports, re-exports, dynamic imports, `new URL(…)` entry points). */
function relativeSpecifiers(source: string): string[] {
  const specs: string[] = []
  const pattern = /(?:from\s+|import\s*\(\s*|new URL\(\s*)['"`](\.{1,2}\/[^'"`$]+)['"`]/g
  for (const m of source.matchAll(pattern)) specs.push(m[1] as string)
  return specs
}

function filesOf(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f))
}

test('each tier imports only the sources, test/support and test/fakes, never another tier', () => {
  const crossings: string[] = []
  for (const tier of TIERS) {
    for (const file of filesOf(join(TEST, tier))) {
      for (const spec of relativeSpecifiers(readFileSync(file, 'utf8'))) {
        const target = relative(TEST, resolve(dirname(file), spec))
        if (target.startsWith('..')) continue // the sources, bench/, bin/
        const top = target.split('/')[0] as string
        if (top !== tier && !SHARED.includes(top)) crossings.push(`${relative(ROOT, file)} → ${spec}`)
      }
    }
  }
  expect(crossings).toEqual([])
})

test('test/support and test/fakes import no tier', () => {
  const crossings: string[] = []
  for (const dir of SHARED)
    for (const file of filesOf(join(TEST, dir)))
      for (const spec of relativeSpecifiers(readFileSync(file, 'utf8'))) {
        const top = relative(TEST, resolve(dirname(file), spec)).split('/')[0] as string
        if (TIERS.includes(top)) crossings.push(`${relative(ROOT, file)} → ${spec}`)
      }
  expect(crossings).toEqual([])
})

test('helpers live in test/support: a tier folder holds tests, and data files under fixtures/', () => {
  const strays = TIERS.flatMap((tier) =>
    filesOf(join(TEST, tier))
      .map((f) => relative(TEST, f))
      .filter((f) => !/\.(test|live)\.ts$/.test(f) && !f.includes('/fixtures/')),
  )
  expect(strays).toEqual([])
})
