import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { describe, expect, test } from 'vitest'
import { z } from 'zod'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const DEFAULT_FILE = 'docker-compose.yml'
const ENGINE_FILE = 'docker-compose.docker-engine.yml'
const SOCKET = '/var/run/docker.sock'

/** The parts of a compose service these tests look at (zod drops the rest). */
const ServiceSchema = z.object({
  image: z.string().optional(),
  build: z
    .object({
      context: z.string(),
      network: z.string().optional(),
      args: z.record(z.string(), z.string()).optional(),
    })
    .optional(),
  command: z.array(z.string()).optional(),
  environment: z.record(z.string(), z.string()).optional(),
  volumes: z.array(z.string()).optional(),
  ports: z.array(z.string()).optional(),
  healthcheck: z.object({ test: z.array(z.string()).optional(), disable: z.boolean().optional() }).optional(),
  depends_on: z.record(z.string(), z.object({ condition: z.string() })).optional(),
  deploy: z.object({ replicas: z.number().int() }).optional(),
  group_add: z.array(z.string()).optional(),
  container_name: z.string().optional(),
})
type Service = z.output<typeof ServiceSchema>
const ComposeSchema = z.object({
  services: z.record(z.string(), ServiceSchema),
  volumes: z.record(z.string(), z.unknown()).optional(),
})

function load(file: string): { text: string; doc: z.output<typeof ComposeSchema>; raw: unknown } {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const raw: unknown = parse(text)
  return { text, doc: ComposeSchema.parse(raw), raw }
}

function service(doc: z.output<typeof ComposeSchema>, name: string): Service {
  const s = doc.services[name]
  expect(s, `service ${name}`).toBeDefined()
  return s ?? {}
}

/** The value after `flag` in a command, if any. */
function flagValue(command: readonly string[] | undefined, flag: string): string | undefined {
  const i = (command ?? []).indexOf(flag)
  return i >= 0 ? command?.[i + 1] : undefined
}

/** `docker compose` or `docker-compose`, whichever answers `version` on this machine. */
function composeTool(): string[] | undefined {
  for (const cmd of [['docker', 'compose'], ['docker-compose']]) {
    const [bin = '', ...rest] = cmd
    const r = spawnSync(bin, [...rest, 'version'], { encoding: 'utf8', timeout: 30_000 })
    if (r.status === 0) return cmd
  }
  return undefined
}

function composeConfig(tool: readonly string[], files: readonly string[], env: Record<string, string>) {
  const [bin = '', ...rest] = tool
  const envWithout = { ...process.env }
  delete envWithout['SBX_API_KEY']
  delete envWithout['DOCKER_SOCKET_GID']
  return spawnSync(bin, [...rest, ...files.flatMap((f) => ['-f', f]), 'config', '--quiet'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...envWithout, ...env },
  })
}

describe('docker-compose.yml', () => {
  const { doc } = load(DEFAULT_FILE)

  test('runs redis, api, exec workers and agent-run workers', () => {
    expect(Object.keys(doc.services).sort()).toEqual(['agent-worker', 'api', 'redis', 'worker'])
  })

  test('no compose-spec-only keys: Debian’s docker-compose 1.29 reads the file', () => {
    expect(Object.keys(parse(readFileSync(join(ROOT, DEFAULT_FILE), 'utf8')) as object).sort()).toEqual([
      'services',
      'volumes',
    ])
  })

  test('redis: every write fsynced (appendfsync always, as RELIABILITY.md measured), noeviction, a healthcheck', () => {
    const redis = service(doc, 'redis')
    expect(redis.image).toMatch(/^\$\{SBX_REDIS_IMAGE:-sandbox-router\/redis:7\}$/)
    expect(flagValue(redis.command, '--appendonly')).toBe('yes')
    expect(flagValue(redis.command, '--appendfsync')).toBe('always')
    expect(flagValue(redis.command, '--dir')).toBe('/data')
    expect(flagValue(redis.command, '--maxmemory-policy')).toBe('noeviction')
    const dataVolume = redis.volumes?.find((v) => v.endsWith(':/data'))
    expect(dataVolume).toBeDefined()
    const volumeName = dataVolume?.split(':')[0] ?? ''
    expect(Object.keys(doc.volumes ?? {})).toContain(volumeName)
    expect(redis.healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping'])
    // Reachable from the compose network only.
    expect(redis.ports).toBeUndefined()
  })

  test('api: `sbx api --redis` on port 8080, key from the environment, waits for a healthy redis', () => {
    const api = service(doc, 'api')
    expect(api.command?.[0]).toBe('api')
    expect(flagValue(api.command, '--redis')).toBe('redis://redis:6379')
    expect(flagValue(api.command, '--host')).toBe('0.0.0.0')
    expect(flagValue(api.command, '--port')).toBe('8080')
    expect(api.ports?.some((p) => p.endsWith(':8080'))).toBe(true)
    expect(api.environment?.['SBX_API_KEY']).toMatch(/^\$\{SBX_API_KEY:\?.+\}$/)
    expect(api.depends_on?.['redis']?.condition).toBe('service_healthy')
    // Built from the local Node 20 base unless SBX_NODE_IMAGE names another; npm ci needs host networking here.
    expect(api.build).toMatchObject({ context: '.', network: 'host' })
    expect(api.build?.args?.['NODE_IMAGE']).toBe('${SBX_NODE_IMAGE:-sandbox-router/node:20}')
    // Liveness comes from the image's HEALTHCHECK (/healthz): not switched off here.
    expect(api.healthcheck?.disable).not.toBe(true)
  })

  test('worker: `sbx worker --redis`, scalable (replicas, no fixed name, no published port)', () => {
    const worker = service(doc, 'worker')
    expect(worker.command?.[0]).toBe('worker')
    expect(flagValue(worker.command, '--redis')).toBe('redis://redis:6379')
    expect(worker.deploy?.replicas).toBeGreaterThanOrEqual(1)
    expect(worker.container_name).toBeUndefined()
    expect(worker.ports).toBeUndefined()
    expect(worker.depends_on?.['redis']?.condition).toBe('service_healthy')
    expect(worker.image).toBe(service(doc, 'api').image)
    // Workers serve no HTTP, so the image's /healthz check is disabled for them explicitly.
    expect(worker.healthcheck?.disable).toBe(true)
    expect(worker.build).toEqual(service(doc, 'api').build)
  })

  test('agent-worker: `sbx worker --agent --redis`, the model key, no engine needed', () => {
    const agent = service(doc, 'agent-worker')
    expect(agent.command?.slice(0, 2)).toEqual(['worker', '--agent'])
    expect(flagValue(agent.command, '--redis')).toBe('redis://redis:6379')
    expect(agent.image).toBe(service(doc, 'api').image)
    expect(agent.environment?.['SBX_MODEL_API_KEY']).toBe('${SBX_MODEL_API_KEY:-}')
    expect(agent.healthcheck?.disable).toBe(true)
    expect(agent.container_name).toBeUndefined()
    expect(agent.depends_on?.['redis']?.condition).toBe('service_healthy')
  })

  test('api and workers read one config file, mounted read-only from deploy/ (or SBX_CONFIG_DIR)', () => {
    for (const name of ['api', 'worker', 'agent-worker']) {
      const s = service(doc, name)
      expect(s.volumes, name).toContain('${SBX_CONFIG_DIR:-./deploy}:/app/config:ro')
      expect(s.environment?.['SBX_CONFIG'], name).toBe('/app/config/sandbox-router.config.yaml')
    }
    const shipped = parse(readFileSync(join(ROOT, 'deploy', 'sandbox-router.config.yaml'), 'utf8')) as {
      models?: Record<string, { apiKeyEnv?: string }>
    }
    expect(shipped.models?.['default']?.apiKeyEnv).toBe('SBX_MODEL_API_KEY')
  })

  test('grants no Docker engine access: no socket mount, no DOCKER_HOST', () => {
    for (const [name, s] of Object.entries(doc.services)) {
      expect(s.volumes ?? [], name).not.toEqual(
        expect.arrayContaining([expect.stringContaining('docker.sock')]),
      )
      expect(s.environment?.['DOCKER_HOST'], name).toBeUndefined()
      expect(s.group_add, name).toBeUndefined()
    }
    expect(JSON.stringify(load(DEFAULT_FILE).raw)).not.toContain('docker.sock')
  })
})

describe('docker-compose.docker-engine.yml (the explicit opt-in)', () => {
  const { doc, text } = load(ENGINE_FILE)

  test('mounts the engine socket into the workers (and the API), with the socket group', () => {
    for (const name of ['worker', 'api']) {
      const s = service(doc, name)
      expect(s.volumes).toContain(`${SOCKET}:${SOCKET}`)
      expect(s.group_add?.[0]).toMatch(/^\$\{DOCKER_SOCKET_GID:\?.+\}$/)
      expect(s.environment?.['DOCKER_HOST']).toBe(`unix://${SOCKET}`)
    }
    expect(Object.keys(doc.services).sort()).toEqual(['api', 'worker'])
  })

  test('documents what it grants', () => {
    expect(text).toMatch(/ROOT-EQUIVALENT/)
    expect(text).toContain('sbx image build')
    expect(load(DEFAULT_FILE).text).toContain(ENGINE_FILE)
  })
})

describe('compose tool validation', () => {
  test('`docker compose config` accepts the files where a compose tool exists', () => {
    const tool = composeTool()
    let validated = false
    if (tool) {
      const env = { SBX_API_KEY: 'k'.repeat(32), DOCKER_SOCKET_GID: '999' }
      const plain = composeConfig(tool, [DEFAULT_FILE], env)
      expect(plain.status, plain.stderr).toBe(0)
      const withEngine = composeConfig(tool, [DEFAULT_FILE, ENGINE_FILE], env)
      expect(withEngine.status, withEngine.stderr).toBe(0)
      // The required variables are enforced by compose itself.
      expect(composeConfig(tool, [DEFAULT_FILE], {}).status).not.toBe(0)
      expect(
        composeConfig(tool, [DEFAULT_FILE, ENGINE_FILE], { SBX_API_KEY: env.SBX_API_KEY }).status,
      ).not.toBe(0)
      validated = true
    }
    // Which path ran: with a compose tool the files were validated by it; without one (this
    // machine), the structural tests above are the whole check.
    expect(validated).toBe(tool !== undefined)
  })
})
