import fc from 'fast-check'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { stringify as toYaml } from 'yaml'
import { ConfigSchema, loadConfig } from '../../src/config/index.js'
import { AppError } from '../../src/errors.js'
import { deepJson, hostileJson, hostileJsonText, hostileLeaf, shapedLike } from '../support/hostile-input.js'

/*
 * Random and hostile config files: loadConfig returns a valid config or throws
 * AppError('CONFIG_INVALID') naming the file — never another error, never a crash.
 */

let dir: string
let n = 0

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-fuzz-config-'))
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const EXTENSIONS = ['.json', '.yaml', '.yml'] as const

/** Writes `content` to a fresh file and loads it. */
function loadText(
  content: string | Uint8Array,
  ext: string,
  env: Record<string, string> = {},
): { file: string; outcome: unknown } {
  const file = join(dir, `c${n++}${ext}`)
  writeFileSync(file, content)
  try {
    return { file, outcome: loadConfig({ file, cwd: dir, env }) }
  } catch (err) {
    return { file, outcome: err }
  } finally {
    rmSync(file, { force: true })
  }
}

/** The property: a config that validates, or CONFIG_INVALID naming the file. */
function expectValidOrConfigInvalid(outcome: unknown, file: string): void {
  if (outcome instanceof Error) {
    expect(outcome, `${outcome.name}: ${outcome.message}`).toBeInstanceOf(AppError)
    expect((outcome as AppError).code).toBe('CONFIG_INVALID')
    expect(outcome.message).toContain(file)
    return
  }
  const { config } = outcome as { config: unknown }
  expect(ConfigSchema.safeParse(config).success).toBe(true)
}

/** Objects shaped like the config, with hostile leaves anywhere. */
const configShaped = shapedLike({
  server: shapedLike({
    port: fc.integer({ min: -1, max: 70_000 }),
    host: hostileLeaf,
    bodyLimitBytes: hostileLeaf,
    fileLimitBytes: hostileLeaf,
  }),
  queue: shapedLike({
    driver: fc.constantFrom('memory', 'bullmq', 'kafka'),
    redisUrl: hostileLeaf,
    prefix: hostileLeaf,
    concurrency: hostileLeaf,
  }),
  providers: shapedLike({
    docker: shapedLike({ enabled: fc.boolean(), host: hostileLeaf }),
    e2b: shapedLike({ enabled: fc.boolean(), apiUrl: hostileLeaf }),
  }),
  profiles: fc.dictionary(
    fc.constantFrom('default', 'py', '__proto__', 'bad name'),
    shapedLike({ provider: fc.constantFrom('docker', 'nope'), memoryMb: hostileLeaf, cpu: hostileLeaf }),
  ),
  routing: shapedLike({ secretScanner: fc.constantFrom('off', 'redact', 'block', 'maybe') }),
  extensions: fc.array(hostileLeaf, { maxLength: 3 }),
  apiKeys: fc.array(shapedLike({ key: hostileLeaf, tenant: hostileLeaf, sha256: hostileLeaf }), {
    maxLength: 2,
  }),
  quotas: shapedLike({ maxSandboxes: hostileLeaf, requestsPerSecond: hostileLeaf }),
  models: fc.dictionary(
    fc.string(),
    shapedLike({ kind: fc.constantFrom('anthropic', 'x'), model: hostileLeaf }),
  ),
})

const FIELDS = ['server', 'queue', 'providers', 'profiles', 'routing', 'extensions', 'apiKeys', 'quotas']

const YAML_HOSTILE = [
  'a: &a [x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d]\n',
  'server: !!js/function "function(){ return 1 }"\n',
  'server: !!binary aGVsbG8=\n',
  '<<: {server: {port: 1}}\n',
  'queue: {driver: bullmq}\nqueue: {driver: memory}\n',
  '\tserver:\n\t\tport: 1\n',
  '%YAML 9.9\n---\nserver: {}\n',
  '--- a\n--- b\n',
  '? [a, b]\n: c\n',
  '__proto__: {polluted: true}\n',
  'server:\n  port: 0x1F90\n',
  'server:\n  port: .inf\n',
  'server:\n  port: 8080\n  port: 9090\n',
  '"\\ud800": 1\n',
  '',
  '~\n',
  '- 1\n- 2\n',
]

describe('fuzzing loadConfig', () => {
  test('random JSON text and config-shaped objects in .json files', () => {
    const text = fc.oneof(
      configShaped.map((v) => JSON.stringify(v)),
      hostileJsonText(FIELDS),
      fc
        .tuple(fc.constantFrom(...FIELDS), fc.integer({ min: 10_000, max: 200_000 }))
        .map(([k, d]) => `{"${k}":${deepJson(d, 'array')}}`),
    )
    // Env overrides rewrite sections of the file's object: fuzz them too.
    const env = fc.record(
      {
        REDIS_URL: fc.string(),
        DOCKER_HOST: fc.string(),
        PORT: fc.constantFrom('', '80', '-1', 'x', '1e309'),
      },
      { requiredKeys: [] },
    )
    fc.assert(
      fc.property(text, env, (t, e) => {
        const { file, outcome } = loadText(t, '.json', e)
        expectValidOrConfigInvalid(outcome, file)
      }),
      { numRuns: 400 },
    )
  })

  test('random YAML text and config-shaped objects in .yaml/.yml files', () => {
    const text = fc.oneof(
      configShaped.map((v) => toYaml(v)),
      hostileJson(FIELDS).map((v) => toYaml(v)),
      fc.constantFrom(...YAML_HOSTILE),
      fc.integer({ min: 1_000, max: 5_000 }).map((d) => `server: ${deepJson(d, 'array')}\n`),
      fc.string({ unit: 'binary', maxLength: 300 }),
    )
    fc.assert(
      fc.property(text, fc.constantFrom('.yaml', '.yml'), (t, ext) => {
        const { file, outcome } = loadText(t, ext)
        expectValidOrConfigInvalid(outcome, file)
      }),
      { numRuns: 300 },
    )
  })

  test('binary garbage under any extension', () => {
    const ext = fc.constantFrom(...EXTENSIONS, '.toml', '', '.JSON', '.json5')
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2_000 }), ext, (bytes, e) => {
        const { file, outcome } = loadText(bytes, e)
        expectValidOrConfigInvalid(outcome, file)
      }),
      { numRuns: 300 },
    )
  })

  test('a config path that is a directory, or missing', () => {
    for (const name of ['as-dir.json', 'as-dir.yaml']) {
      const path = join(dir, name)
      mkdirSync(path)
      let outcome: unknown
      try {
        outcome = loadConfig({ file: path, env: {} })
      } catch (err) {
        outcome = err
      }
      expectValidOrConfigInvalid(outcome, path)
    }
    expect(() => loadConfig({ file: join(dir, 'missing.json'), env: {} })).toThrow(AppError)
  })
})
