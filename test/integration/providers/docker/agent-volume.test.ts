import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import { defaultAgentBinary } from '../../../../providers/docker/agent-volume.js'
import { createDockerProvider } from '../../../../providers/docker/index.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { plainImage } from '../../../support/plain-images.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

const run = promisify(execFile)

/** The agent volume a container mounts (its `/.sbx-agent` mount) and whether it is read-only. */
async function agentMount(id: string): Promise<{ Name: string; RW: boolean }> {
  const { stdout } = await run('docker', ['inspect', '-f', '{{json .Mounts}}', id])
  const mounts = JSON.parse(stdout) as { Name: string; Destination: string; RW: boolean }[]
  const mount = mounts.find((m) => m.Destination === '/.sbx-agent')
  if (!mount) throw new Error(`container ${id} has no /.sbx-agent mount: ${stdout}`)
  return mount
}

/** How the provider brings its agent into an image that has none: a read-only volume per agent build. */
describe('the agent volume', () => {
  const fx = dockerFixture()
  const busybox = plainImage('busybox')
  afterAll(async () => {
    expect(await fx.cleanup()).toBe(0)
  }, 60_000)

  test('is mounted read-only; the image has no agent of its own', async () => {
    const sb = await fx.create({ image: busybox })
    const mount = await agentMount(sb.ref.id)
    expect(mount.Name).toMatch(/^sandbox-router-agent-[0-9a-f]{16}$/)
    expect(mount.RW).toBe(false)
    const r = await sb.exec({ ...quick, command: 'ls /usr/local/bin/sbx-agent; touch /.sbx-agent/x' })
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/No such file|Read-only file system/)
    expect(r.stderr).toContain('Read-only file system')
  }, 60_000)

  test('removed between sandboxes (docker volume prune), it is filled again on the next create', async () => {
    // An agent build of its own (trailing bytes do not change an ELF binary): a volume no other
    // test file mounts, so it can be removed here.
    const dir = mkdtempSync(join(tmpdir(), 'sbx-agent-'))
    const binary = join(dir, 'sbx-agent')
    const built = defaultAgentBinary()
    if (!built) throw new Error('no .sbx/sbx-agent: run npm run setup')
    writeFileSync(binary, Buffer.concat([readFileSync(built), Buffer.from(`\n${randomUUID()}\n`)]), {
      mode: 0o755,
    })
    const provider = createDockerProvider({ instanceId: 'docker-integration-test', agentBinary: binary })
    const profile = resolveProfile('own-agent', { provider: 'docker', image: busybox })
    let volume: string | undefined
    try {
      const first = await provider.create(profile, { labels: fx.labels })
      volume = (await agentMount(first.ref.id)).Name
      await provider.destroy(first.ref)
      await run('docker', ['volume', 'rm', volume])
      // The provider still thinks the volume is filled; the engine makes an empty one for the mount.
      const next = await provider.create(profile, { labels: fx.labels })
      expect((await next.exec({ ...quick, command: 'echo ok' })).stdout).toBe('ok\n')
      expect((await agentMount(next.ref.id)).Name).toBe(volume)
      await provider.destroy(next.ref)
    } finally {
      await provider.close()
      if (volume) await run('docker', ['volume', 'rm', '-f', volume]).catch(() => undefined)
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  test('without an agent binary (agentBinary: false) an image without one is a clear CONFIG_INVALID, not runc text', async () => {
    const provider = createDockerProvider({ instanceId: 'docker-integration-test', agentBinary: false })
    try {
      const profile = resolveProfile('no-agent', { provider: 'docker', image: busybox })
      const err = await rejectionOf(provider.create(profile, { labels: fx.labels }))
      expect(err).toMatchObject({ code: 'CONFIG_INVALID' })
      const message = (err as Error).message
      expect(message).toContain(`image ${busybox} has no /usr/local/bin/sbx-agent`)
      expect(message).toMatch(/npm run setup.*SBX_AGENT_BIN.*FROM sandbox-router\/base/)
      expect(message).not.toMatch(/OCI runtime|runc/)
    } finally {
      await provider.close()
    }
  }, 60_000)
})
