import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, test } from 'vitest'
import { VOLUME_LABELS, inspectVolume, workspaceVolumeName } from '../../../../providers/docker/workspace.js'
import { SNAPSHOT_REPO, snapshotVolumeName } from '../../../../providers/docker/workspace.js'
import { AppError } from '../../../../src/errors.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { LABELS, type Labels } from '../../../../src/sandbox/types.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

/*
 * Persistent workspaces and snapshots of the Docker provider, against the real engine: a session's
 * volume outlives its container; a snapshot (image + workspace copy) restores into a new session.
 */
const fx = dockerFixture()
const { provider } = fx
const docker = provider.docker
const scope = `ws-it-${randomUUID().slice(0, 8)}`
const persistent = resolveProfile('pws', { provider: 'docker', workspace: { persistent: true } })
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

async function sh(labels: Labels, command: string) {
  const sb = await provider.create(persistent, { labels })
  try {
    return await sb.exec({ command, ...quick })
  } finally {
    await provider.destroy(sb.ref)
  }
}

describe('docker persistent workspace', () => {
  test('a session volume outlives a killed and removed container; drop deletes it', async () => {
    const labels = sessionLabels(`s-${randomUUID()}`)
    sessions.push(labels)
    const sb = await provider.create(persistent, { labels })
    expect((await sb.exec({ command: 'echo kept > /workspace/a.txt && id -u', ...quick })).stdout).toBe(
      '1000\n',
    )
    await docker.getContainer(sb.ref.id).kill()
    await provider.destroy(sb.ref)
    const name = workspaceVolumeName(labels)
    expect(name).toBeDefined()
    const vol = await inspectVolume(docker, name ?? '')
    expect(vol?.Labels?.[LABELS.tenant]).toBe('acme')
    expect(vol?.Labels?.[VOLUME_LABELS.kind]).toBe('workspace')
    const again = await sh(labels, 'cat /workspace/a.txt && touch /workspace/b')
    expect(again.stdout).toBe('kept\n')
    await provider.workspaces?.drop(labels)
    expect(await inspectVolume(docker, name ?? '')).toBeUndefined()
  })

  test('a warm or ephemeral sandbox of a persistent profile has a tmpfs workspace', async () => {
    const labels = sessionLabels('ephemeral')
    expect(workspaceVolumeName(labels)).toBeUndefined()
    const r = await sh(labels, 'findmnt -n -o FSTYPE /workspace || stat -f -c %T /workspace')
    expect(r.stdout).toContain('tmpfs')
  })

  test('snapshot then restore into a new session: files and root changes are there', async () => {
    const a = sessionLabels(`s-${randomUUID()}`)
    const b = sessionLabels(`s-${randomUUID()}`)
    sessions.push(a, b)
    const profile = resolveProfile('pws-rw', {
      provider: 'docker',
      workspace: { persistent: true },
      readOnlyRoot: false,
      // Root (without capabilities) may write to the image's own root-owned folders.
      user: '0:0',
    })
    const sb = await provider.create(profile, { labels: a })
    await sb.exec({ command: 'echo ws > /workspace/f && echo root > /etc/root-change', ...quick })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    const cap = await provider.snapshots?.capture(sb.ref, id, { labels: a })
    expect(cap?.workspaceBytes).toBeGreaterThan(0)
    expect((await docker.getImage(`${SNAPSHOT_REPO}:${id}`).inspect()).Id).toBeTruthy()
    await provider.snapshots?.restore(id, b)
    const sb2 = await provider.create(profile, { labels: b })
    const r = await sb2.exec({ command: 'cat /workspace/f /etc/root-change', ...quick })
    expect(r.stdout).toBe('ws\nroot\n')
    // Independent copies: a change in the restored session leaves the source alone.
    await sb2.exec({ command: 'echo changed > /workspace/f', ...quick })
    expect((await sb.exec({ command: 'cat /workspace/f', ...quick })).stdout).toBe('ws\n')
    // Restoring into a session that has a workspace already is a conflict.
    const err = await rejectionOf(provider.snapshots?.restore(id, b) ?? Promise.resolve())
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('CONFLICT')
    await provider.snapshots?.remove(id)
    expect(await inspectVolume(docker, snapshotVolumeName(id))).toBeUndefined()
    await expect(docker.getImage(`${SNAPSHOT_REPO}:${id}`).inspect()).rejects.toThrow()
  })

  test('a gVisor (runsc) sandbox snapshots and restores too', async () => {
    const a = sessionLabels(`s-${randomUUID()}`)
    const b = sessionLabels(`s-${randomUUID()}`)
    sessions.push(a, b)
    const profile = resolveProfile('pws-runsc', {
      provider: 'docker',
      runtime: 'runsc',
      workspace: { persistent: true },
    })
    const sb = await provider.create(profile, { labels: a })
    await sb.exec({ command: 'echo gvisor > /workspace/g', ...quick })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    await provider.snapshots?.capture(sb.ref, id, { labels: a })
    // Unpaused again: it still runs commands.
    expect((await sb.exec({ command: 'echo alive', ...quick })).stdout).toBe('alive\n')
    await provider.snapshots?.restore(id, b)
    const sb2 = await provider.create(profile, { labels: b })
    expect((await sb2.exec({ command: 'cat /workspace/g', ...quick })).stdout).toBe('gvisor\n')
  })

  test('a snapshot of a tmpfs workspace is refused, and one over its size bound', async () => {
    const labels = sessionLabels(`s-${randomUUID()}`)
    sessions.push(labels)
    const tmp = await fx.create()
    const err = await rejectionOf(
      provider.snapshots?.capture(tmp.ref, 'snap-x', { labels }) ?? Promise.resolve(),
    )
    expect((err as AppError).code).toBe('BAD_REQUEST')
    expect((err as AppError).message).toContain('workspace: { persistent: true }')
    const sb = await provider.create(persistent, { labels })
    await sb.exec({ command: 'head -c 2000000 /dev/zero > /workspace/big', ...quick })
    const id = `snap-${randomUUID()}`
    snapshots.push(id)
    const big = await rejectionOf(
      provider.snapshots?.capture(sb.ref, id, { labels, maxWorkspaceBytes: 1_000_000 }) ?? Promise.resolve(),
    )
    expect((big as AppError).code).toBe('NO_SPACE')
    expect(await inspectVolume(docker, snapshotVolumeName(id))).toBeUndefined()
  })
})
