import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8')

interface Instruction {
  op: string
  args: string
}

/** Dockerfile instructions, continuation lines joined, comments dropped, grouped by stage. */
function stages(text: string): Instruction[][] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
  const out: Instruction[][] = []
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? []
    const ins = { op: op.toUpperCase(), args }
    if (ins.op === 'FROM') out.push([])
    out.at(-1)?.push(ins)
  }
  return out
}

describe('Dockerfile', () => {
  const all = stages(read('Dockerfile'))
  const final = all.at(-1) ?? []
  const find = (op: string): Instruction[] => final.filter((i) => i.op === op)

  test('multi-stage on a Node 20 base: builds dist/ in one stage, installs production deps only', () => {
    expect(all.length).toBeGreaterThanOrEqual(2)
    expect(read('Dockerfile')).toMatch(/ARG NODE_IMAGE=node:20-bookworm-slim/)
    for (const stage of all) expect(stage[0]?.args).toMatch(/^\$\{NODE_IMAGE\}( AS \S+)?$/)
    const runs = all
      .flat()
      .filter((i) => i.op === 'RUN')
      .map((i) => i.args)
    expect(runs.some((r) => r.includes('npm run build'))).toBe(true)
    expect(runs.some((r) => r.includes('npm ci --omit=dev'))).toBe(true)
    expect(final.some((i) => i.op === 'COPY' && /--from=build .*dist/.test(i.args))).toBe(true)
  })

  test('no BuildKit syntax directive: the classic builder needs no registry to read it', () => {
    expect(read('Dockerfile')).not.toMatch(/^#\s*syntax=/m)
  })

  test('the final stage runs as a non-root user', () => {
    const user = find('USER').at(-1)?.args
    expect(user).toBeDefined()
    expect(user).not.toMatch(/^(root|0)(:|$)/)
  })

  test('HEALTHCHECK polls /healthz; ENTRYPOINT is node bin/sbx.js', () => {
    const health = find('HEALTHCHECK').at(-1)?.args ?? ''
    expect(health).toContain('/healthz')
    expect(health).toMatch(/CMD \[/)
    const entry = find('ENTRYPOINT').at(-1)?.args ?? ''
    expect(JSON.parse(entry)).toEqual(['node', 'bin/sbx.js'])
    expect(find('EXPOSE').map((i) => i.args)).toContain('8080')
  })

  test('bin/sbx.js finds what the build stage emits (dist/src/cli/main.js)', () => {
    const tsconfig = JSON.parse(read('tsconfig.json')) as {
      compilerOptions: { outDir: string; rootDir: string }
    }
    expect(tsconfig.compilerOptions).toMatchObject({ outDir: 'dist', rootDir: '.' })
    expect(read('bin/sbx.js')).toContain("join(root, 'dist', 'src', 'cli', 'main.js')")
    expect(read('tsconfig.build.json')).toContain('"src"')
  })
})

describe('.dockerignore', () => {
  test('keeps secrets and local state out of the build context', () => {
    const entries = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
    expect(entries).toEqual(
      expect.arrayContaining(['.git', 'node_modules', 'dist', '.sbx', '.env', '.env.*']),
    )
  })
})
