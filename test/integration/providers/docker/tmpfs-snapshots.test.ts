import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, test } from 'vitest'
import {
  VOLUME_LABELS,
  inspectVolume,
  snapshotVolumeName,
  workspaceVolumeName,
} from '../../../../providers/docker/workspace.js'
import type { AppError } from '../../../../src/errors.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { LABELS, type Labels } from '../../../../src/sandbox/types.js'
import { PROVIDER_LABELS } from '../../../../src/sandbox/index.js'
import { agentChannel } from '../../../support/agent-channel.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

/*
 * Snapshots of Docker sandboxes without a persistent workspace (`capture(…, { tmpfs: true })`, what
 * the E2B endpoint takes): the files of their in-memory mounts go into the snapshot's volume, and a
 * session restored from it gets them in each of its sandboxes, as the sandbox's user.
 */
const fx = dockerFixture()
const { provider } = fx
const docker = provider.docker
const scope = `tmpfs-snap-it-${randomUUID().slice(0, 8)}`
// E2B's shape: the home (outside /workspace and /tmp) is a tmpfs of its own.
const home = resolveProfile('home', {
  provider: 'docker',
  cwd: '/home/user',
  env: { HOME: '/home/user' },
  user: '1001:1001',
})
const sessionLabels = (session: string): Labels => ({
  ...fx.labels,
  [LABELS.owner]: 'sandbox-router',
  [LABELS.tenant]: 'acme',
  [LABELS.session]: session,
  'sandbox-router.scope': scope,
})
const snapshots: string[] = []
const sessions: Labels[] = []

afterAll(async () => {
  for (const id of snapshots) await provider.snapshots?.remove(id)
  expect(await fx.cleanup()).toBe(0)
  for (const l of sessions) await provider.workspaces?.drop(l)
})

describe('docker snapshots of in-memory mounts', () => {
  test("capture and restore: home, /tmp and /workspace files come back as the user's; the agent's own do not", async () => {
    const a = sessionLabels(`s-${randomUUID()}`)
    const b = sessionLabels(`s-${randomUUID()}`)
    sessions.push(a, b)
    const src = await provider.create(home, { labels: a })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    try {
      const made = await src.exec({
        command:
          'mkdir -p app/sub && echo cfg > app/sub/c.json && echo dot > .hidden && ln -s app/sub/c.json link && ' +
          'echo t > /tmp/t.txt && echo w > /workspace/w.txt && mkdir -p /tmp/.sbx-fake && echo x > /tmp/.sbx-fake/f',
        ...quick,
      })
      expect(made.exitCode).toBe(0)
      const cap = await provider.snapshots?.capture(src.ref, id, { labels: a, tmpfs: true })
      expect(cap?.layout).toBe('tmpfs')
      expect(cap?.workspaceBytes).toBeGreaterThan(0)
    } finally {
      await provider.destroy(src.ref)
    }
    const vol = await inspectVolume(docker, snapshotVolumeName(id))
    expect(vol?.Labels?.[VOLUME_LABELS.layout]).toBe('tmpfs')

    await provider.snapshots?.restore(id, b)
    const seed = await inspectVolume(docker, workspaceVolumeName(b) ?? '')
    expect(seed?.Labels?.[VOLUME_LABELS.layout]).toBe('tmpfs')
    // Deleting the snapshot leaves the session its own copy.
    await provider.snapshots?.remove(id)
    for (let i = 0; i < 2; i++) {
      // Every sandbox of the session starts from the snapshot (here: a second one after a destroy).
      const sb = await provider.create(home, { labels: b })
      try {
        const r = await sb.exec({
          command:
            'cat app/sub/c.json .hidden link /tmp/t.txt /workspace/w.txt; stat -c %U app/sub/c.json; ' +
            'ls -a /tmp | grep -c fake; touch /.sbx-seed/x 2>/dev/null || echo seed-read-only',
          ...quick,
        })
        expect(r.stdout).toBe('cfg\ndot\ncfg\nt\nw\nuser\n0\nseed-read-only\n')
        // Started from the snapshot's image, it has a direct-channel folder of its own, not the source's.
        const labels = (await docker.getContainer(sb.ref.id).inspect()).Config.Labels
        expect(labels[PROVIDER_LABELS.agentDir]).toMatch(/^[0-9a-f]{16}$/)
        expect((await agentChannel(sb.ref.id)).stdin).toMatch(/^socket:/)
      } finally {
        await provider.destroy(sb.ref)
      }
    }
    await provider.workspaces?.drop(b)
    expect(await inspectVolume(docker, workspaceVolumeName(b) ?? '')).toBeUndefined()
  })

  test('sessions restored from one snapshot can all be dropped at once (a fork of two, killed together)', async () => {
    const src = sessionLabels(`s-${randomUUID()}`)
    const forks = [sessionLabels(`s-${randomUUID()}`), sessionLabels(`s-${randomUUID()}`)]
    sessions.push(src, ...forks)
    const sb = await provider.create(home, { labels: src })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    try {
      await provider.snapshots?.capture(sb.ref, id, { labels: src, tmpfs: true })
    } finally {
      await provider.destroy(sb.ref)
    }
    for (const l of forks) await provider.snapshots?.restore(id, l)
    await provider.snapshots?.remove(id)
    // Their session images are tags of one image: removing both at once must not fail either.
    const dropped = await Promise.allSettled(forks.map((l) => provider.workspaces?.drop(l)))
    expect(dropped.map((d) => d.status)).toEqual(['fulfilled', 'fulfilled'])
    for (const l of forks) expect(await inspectVolume(docker, workspaceVolumeName(l) ?? '')).toBeUndefined()
  })

  test('without tmpfs it is refused as before; over the bound it is NO_SPACE and nothing is kept', async () => {
    const labels = sessionLabels(`s-${randomUUID()}`)
    sessions.push(labels)
    const sb = await provider.create(home, { labels })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    try {
      const refused = await rejectionOf(
        provider.snapshots?.capture(sb.ref, id, { labels }) ?? Promise.resolve(),
      )
      expect((refused as AppError).code).toBe('BAD_REQUEST')
      await sb.exec({ command: 'head -c 2000000 /dev/zero > big', ...quick })
      const big = await rejectionOf(
        provider.snapshots?.capture(sb.ref, id, { labels, tmpfs: true, maxWorkspaceBytes: 1_000_000 }) ??
          Promise.resolve(),
      )
      expect((big as AppError).code).toBe('NO_SPACE')
      expect(await inspectVolume(docker, snapshotVolumeName(id))).toBeUndefined()
    } finally {
      await provider.destroy(sb.ref)
    }
  })
})
