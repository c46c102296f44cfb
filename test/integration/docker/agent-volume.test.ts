import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, describe, expect, test } from 'vitest'
import { createDockerProvider } from '../../../providers/docker/index.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import { plainImage } from '../../support/plain-images.js'
import { dockerFixture, quick, rejectionOf } from './fixtures.js'

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
    const first = await fx.create({ image: busybox })
    const { Name } = await agentMount(first.ref.id)
    // Nothing of this file may mount it now (the engine refuses to remove a volume in use).
    for (const ref of await fx.provider.list({ labels: fx.labels })) await fx.provider.destroy(ref)
    const removed = await run('docker', ['volume', 'rm', Name]).then(
      () => true,
      () => false,
    )
    const next = await fx.create({ image: busybox })
    expect((await next.exec({ ...quick, command: 'echo ok' })).stdout).toBe('ok\n')
    expect(removed).toBe(true)
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
