import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { DIRECT_MOUNT, directHost, localEngineId } from '../../../../providers/docker/direct-channel.js'
import { PROVIDER_LABELS } from '../../../../src/sandbox/index.js'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { agentChannel, agentChannels } from '../../../support/agent-channel.js'
import { dockerFixture, quick } from '../../../support/docker-fixture.js'

/**
 * The direct agent channel (providers/docker/direct-channel.ts, agent/direct.c) on the real engine:
 * frames travel on a socket of the provider's, the agent falls back to the exec's pipes where it
 * cannot reach that socket, only the holder of the token becomes the channel, and a sandbox's
 * folder goes with it.
 */
const dir = await mkdtemp(join(tmpdir(), 'sbx-direct-test-'))
const fx = dockerFixture({ agentSocketDir: dir })
let sb: Sandbox
let folder: string

beforeAll(async () => {
  sb = await fx.create()
  const engine = await localEngineId(fx.provider.docker)
  expect(engine, 'the test engine is on this machine').toBeDefined()
  const name = (await fx.provider.docker.getContainer(sb.ref.id).inspect()).Config.Labels[
    PROVIDER_LABELS.agentDir
  ]
  folder = join(dir, engine!, name!)
}, 120_000)

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
  await rm(dir, { recursive: true, force: true })
})

describe('the direct agent channel', () => {
  test('a new sandbox speaks on the provider socket; its folder is read-only inside', async () => {
    const r = await sb.exec({ ...quick, command: `echo hi; touch ${DIRECT_MOUNT}/x 2>&1; true` })
    expect(r.stdout).toMatch(/^hi\n.*Read-only file system/)
    expect(await agentChannel(sb.ref.id)).toMatchObject({ args: expect.stringMatching(/--direct$/) })
    expect((await agentChannel(sb.ref.id)).stdin).toMatch(/^socket:/)
    // The offered socket is gone once the agent connected.
    expect(await readdir(folder)).toEqual([])
  })

  test('an agent that cannot reach the offered socket stays on the exec, and works', async () => {
    // Our folder is no longer the one the container mounts (as for a worker in another filesystem).
    await rm(folder, { recursive: true })
    await mkdir(folder)
    const again = await fx.provider.connect(sb.ref)
    try {
      const r = await again.exec({ ...quick, command: 'echo fallback' })
      expect(r.stdout).toBe('fallback\n')
      // The first handle keeps its direct channel; the new one is on the exec's pipe.
      const stdins = (await agentChannels(sb.ref.id)).map((c) => c.stdin.replace(/:.*/, ''))
      expect(stdins.sort()).toEqual(['pipe', 'socket'])
    } finally {
      await again.close()
    }
  })

  test('destroying a sandbox removes its folder', async () => {
    const other = await fx.create()
    const engine = await localEngineId(fx.provider.docker)
    const name = (await fx.provider.docker.getContainer(other.ref.id).inspect()).Config.Labels[
      PROVIDER_LABELS.agentDir
    ]
    expect(existsSync(join(dir, engine!, name!))).toBe(true)
    await fx.provider.destroy(other.ref)
    expect(existsSync(join(dir, engine!, name!))).toBe(false)
  })
})

describe('an offered socket', () => {
  const labels = { [PROVIDER_LABELS.agentDir]: randomBytes(8).toString('hex') }
  const host = directHost(fx.provider.docker, dir)

  beforeAll(async () => {
    const engine = await localEngineId(fx.provider.docker)
    await mkdir(join(dir, engine!, labels[PROVIDER_LABELS.agentDir]!), { recursive: true })
  })

  const send = (path: string, bytes: string): Promise<'closed'> =>
    new Promise((resolve, reject) => {
      const s = connect(path, () => s.write(bytes))
      s.on('error', reject)
      s.on('close', () => resolve('closed'))
    })

  test('a wrong token is dropped; the right one becomes the channel with what followed it', async () => {
    const offer = await host.offer(labels)
    expect(offer).toBeDefined()
    const [token, inside] = offer!.line.trim().split(' ')
    expect(inside!.startsWith(`${DIRECT_MOUNT}/`)).toBe(true)
    const path = join(
      dir,
      (await localEngineId(fx.provider.docker))!,
      labels[PROVIDER_LABELS.agentDir]!,
      inside!.slice(DIRECT_MOUNT.length + 1),
    )
    expect(await send(path, `${'0'.repeat(token!.length)}\n`)).toBe('closed')
    const client = connect(path, () => client.write(`${token}\nhello frames`))
    const { socket, head } = await offer!.accepted
    expect(head.toString()).toBe('hello frames')
    offer!.close()
    expect(existsSync(path)).toBe(false)
    socket.destroy()
    client.destroy()
  })

  test('a sandbox without a folder here gets no offer', async () => {
    expect(await host.offer({ [PROVIDER_LABELS.agentDir]: randomBytes(8).toString('hex') })).toBeUndefined()
    expect(await host.offer({})).toBeUndefined()
    expect(await directHost(fx.provider.docker, false).offer(labels)).toBeUndefined()
  })
})
