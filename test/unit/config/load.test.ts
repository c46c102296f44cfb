import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { loadConfig } from '../../../src/config/index.js'
import { DEV_IMAGE, usesDevImage } from '../../../src/sandbox/profiles.js'

function dirWith(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-config-'))
  writeFileSync(join(dir, name), text)
  return dir
}

describe('loadConfig', () => {
  test('no file: embedded defaults with a hardened docker `default` profile', () => {
    const { config, profiles, file } = loadConfig({ cwd: mkdtempSync(join(tmpdir(), 'sbx-empty-')), env: {} })
    expect(file).toBeUndefined()
    expect(config.queue.driver).toBe('memory')
    expect(config.providers.docker.enabled).toBe(true)
    expect(profiles.get('default')).toMatchObject({
      provider: 'docker',
      network: 'none',
      readOnlyRoot: true,
      cwd: '/workspace',
    })
  })

  test('a built-in `dev` profile runs the dev image; a config profile of that name replaces it', () => {
    const { profiles } = loadConfig({ cwd: mkdtempSync(join(tmpdir(), 'sbx-empty-')), env: {} })
    expect(profiles.get('dev')).toMatchObject({
      provider: 'docker',
      image: DEV_IMAGE,
      network: 'none',
      readOnlyRoot: true,
      user: '1000:1000',
      diskMb: 2048,
    })
    expect(usesDevImage(profiles.get('dev')!)).toBe(true)
    expect(usesDevImage(profiles.get('default')!)).toBe(false)
    const own = dirWith(
      'sandbox-router.config.json',
      JSON.stringify({ profiles: { dev: { provider: 'docker', cpu: 2 } } }),
    )
    const replaced = loadConfig({ cwd: own, env: {} }).profiles.get('dev')
    expect(replaced?.cpu).toBe(2)
    expect(replaced?.image).toBeUndefined()
  })

  test('routing.code: defaults to docker/dev and python; a missing profile, a foreign one or a shell tool is refused', () => {
    const json = (routing: unknown): string =>
      dirWith('sandbox-router.config.json', JSON.stringify({ routing }))
    const ok = loadConfig({ cwd: json({ code: {} }), env: {} })
    expect(ok.config.routing.code).toEqual({ providerId: 'docker', profile: 'dev', language: 'python' })
    expect(loadConfig({ cwd: json({}), env: {} }).config.routing.code).toBeUndefined()
    expect(() => loadConfig({ cwd: json({ code: { profile: 'nope' } }), env: {} })).toThrow(
      /at "routing.code": profile "nope" is not defined; known profiles: default, dev, e2b/,
    )
    expect(() => loadConfig({ cwd: json({ code: { providerId: 'e2b', profile: 'dev' } }), env: {} })).toThrow(
      /profile "dev" belongs to provider "docker", not "e2b"/,
    )
    expect(() => loadConfig({ cwd: json({ code: { tools: ['python', 'bash'] } }), env: {} })).toThrow(
      /tools names the shell tool "bash"/,
    )
    expect(() => loadConfig({ cwd: json({ code: { tools: [] } }), env: {} })).toThrow(/routing.code.tools/)
    expect(() => loadConfig({ cwd: json({ code: { language: 'ruby' } }), env: {} })).toThrow(
      /routing.code.language/,
    )
  })

  test('routing.shell: a missing profile or one of another provider is refused at load, naming the key', () => {
    const json = (routing: unknown): string =>
      dirWith('sandbox-router.config.json', JSON.stringify({ routing }))
    expect(loadConfig({ cwd: json({}), env: {} }).config.routing.shell).toEqual({
      providerId: 'docker',
      profile: 'default',
    })
    expect(() => loadConfig({ cwd: json({ shell: { profile: 'nope' } }), env: {} })).toThrow(
      /at "routing.shell": profile "nope" is not defined; known profiles: default, dev, e2b/,
    )
    expect(() =>
      loadConfig({ cwd: json({ shell: { providerId: 'daytona', profile: 'default' } }), env: {} }),
    ).toThrow(/set routing.shell.providerId to "docker"/)
  })

  test('JSON and YAML files are found in cwd and validated', () => {
    const json = dirWith(
      'sandbox-router.config.json',
      JSON.stringify({ profiles: { py: { provider: 'docker', memoryMb: 1024 } } }),
    )
    expect(loadConfig({ cwd: json, env: {} }).profiles.get('py')).toMatchObject({
      name: 'py',
      memoryMb: 1024,
      network: 'none',
    })
    const yaml = dirWith('sandbox-router.config.yaml', 'queue:\n  driver: bullmq\n  concurrency: 4\n')
    expect(loadConfig({ cwd: yaml, env: {} }).config.queue).toMatchObject({
      driver: 'bullmq',
      concurrency: 4,
    })
  })

  test('an error names the file, the path and what was expected', () => {
    const dir = dirWith(
      'sandbox-router.config.json',
      JSON.stringify({ profiles: { x: { provider: 'docker', memoryMb: 'lots' } } }),
    )
    expect(() => loadConfig({ cwd: dir, env: {} })).toThrow(
      /sandbox-router\.config\.json: at "profiles\.x\.memoryMb": .*expected number/i,
    )
    const unknown = dirWith('sandbox-router.config.json', JSON.stringify({ queue: { drvier: 'bullmq' } }))
    expect(() => loadConfig({ cwd: unknown, env: {} })).toThrow(/at "queue".*drvier/)
  })

  test('bad JSON and missing files are clear errors', () => {
    const dir = dirWith('sandbox-router.config.json', '{ "queue": ')
    expect(() => loadConfig({ cwd: dir, env: {} })).toThrow(/not valid JSON/)
    expect(() => loadConfig({ file: '/nope/x.json', env: {} })).toThrow(/does not exist/)
    const bad = dirWith('c.toml', 'x=1')
    expect(() => loadConfig({ cwd: bad, file: 'c.toml', env: {} })).toThrow(/unsupported config format/)
  })

  test('env overrides: REDIS_URL switches to the redis driver unless the file sets one; DOCKER_HOST; PORT', () => {
    const empty = mkdtempSync(join(tmpdir(), 'sbx-empty-'))
    const c = loadConfig({
      cwd: empty,
      env: { REDIS_URL: 'redis://10.0.0.1:6380', DOCKER_HOST: 'unix:///x.sock', PORT: '9999' },
    }).config
    expect(c.queue).toMatchObject({ driver: 'redis', redisUrl: 'redis://10.0.0.1:6380' })
    expect(c.providers.docker.host).toBe('unix:///x.sock')
    expect(c.server.port).toBe(9999)
    const pinned = dirWith('sandbox-router.config.json', JSON.stringify({ queue: { driver: 'memory' } }))
    expect(loadConfig({ cwd: pinned, env: { REDIS_URL: 'redis://x' } }).config.queue.driver).toBe('memory')
    const own = dirWith('sandbox-router.config.json', JSON.stringify({ queue: { driver: 'bullmq' } }))
    expect(loadConfig({ cwd: own, env: { REDIS_URL: 'redis://x' } }).config.queue).toMatchObject({
      driver: 'bullmq',
      redisUrl: 'redis://x',
    })
  })

  test('api keys need exactly one of key, keyEnv, sha256', () => {
    const dir = dirWith('sandbox-router.config.json', JSON.stringify({ apiKeys: [{ tenant: 'acme' }] }))
    expect(() => loadConfig({ cwd: dir, env: {} })).toThrow(/exactly one of key, keyEnv, sha256/)
  })
})
