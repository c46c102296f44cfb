import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, test } from 'vitest'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { LABELS, PROVIDER_LABELS } from '../../../../src/sandbox/labels.js'
import type { Labels } from '../../../../src/sandbox/types.js'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { e2bFixture, quick, rejectionOf } from '../../../support/e2b-fixture.js'

const T = 180_000
// Our E2B-compatible endpoint backed by Docker plays E2B: its snapshots are E2B's.
const endpoint = await startE2BEndpoint()
const fx = e2bFixture(endpoint)
const snapshots = fx.provider.snapshots
if (!snapshots) throw new Error('the E2B provider has no snapshots')
const profile = resolveProfile('test', { provider: 'e2b' })
const taken: string[] = []

afterAll(async () => {
  await Promise.all(taken.map((id) => snapshots.remove(id)))
  expect(await fx.cleanup()).toBe(0)
  expect(await endpoint.close()).toBe(0)
}, T)

/** Labels of a session's sandboxes, as the pool gives them (tenant, session hash). */
const sessionLabels = (tenant = 'tenant-a'): Labels => ({
  ...fx.labels,
  [LABELS.tenant]: tenant,
  [LABELS.session]: randomUUID().replaceAll('-', ''),
})

const newSnapshotId = (): string => {
  const id = `snap-${randomUUID()}`
  taken.push(id)
  return id
}

describe('e2b provider snapshots', () => {
  test(
    'capture a sandbox with a file, start a session from it: the file is there; delete the snapshot',
    async () => {
      expect(snapshots.wholeSandbox).toBe(true)
      const source = await fx.create()
      await source.writeFile('/home/user/state.txt', 'before the snapshot')
      const id = newSnapshotId()
      expect(await snapshots.capture(source.ref, id, { labels: fx.labels })).toEqual({
        workspaceBytes: 0,
        layout: 'sandbox',
      })
      // The source goes on and changes on its own.
      await source.writeFile('/home/user/state.txt', 'after the snapshot')

      const labels = sessionLabels()
      await snapshots.restore(id, labels, profile)
      // The snapshot can go at once (a fork deletes it): the restored sandbox holds its state.
      await snapshots.remove(id)
      const copy = await fx.provider.create(profile, { labels })
      const info = await endpoint.info(copy.ref.id)
      expect(info?.metadata).toMatchObject({ ...labels, [PROVIDER_LABELS.e2bSeed]: 'true' })
      expect(copy.ref.id).not.toBe(source.ref.id)
      expect(new TextDecoder().decode(await copy.readFile('/home/user/state.txt'))).toBe(
        'before the snapshot',
      )
      // The session's next sandbox is a new one: the seed is taken once.
      const next = await fx.provider.create(profile, { labels })
      expect(next.ref.id).not.toBe(copy.ref.id)
      const r = await next.exec({ ...quick, command: 'cat /home/user/state.txt 2>/dev/null || echo none' })
      expect(r.stdout).toBe('none\n')
      // Gone from E2B: restoring it again is NOT_FOUND, removing it again is fine.
      expect(await rejectionOf(snapshots.restore(id, sessionLabels(), profile))).toMatchObject({
        code: 'NOT_FOUND',
        message: expect.stringContaining(id),
      })
      await snapshots.remove(id)
    },
    T,
  )

  test(
    'a session of another tenant with the same session hash does not take the restored sandbox',
    async () => {
      const source = await fx.create()
      await source.writeFile('/home/user/mine.txt', 'tenant a')
      const id = newSnapshotId()
      await snapshots.capture(source.ref, id, { labels: fx.labels })
      const labels = sessionLabels('tenant-a')
      await snapshots.restore(id, labels, profile)
      const other = await fx.provider.create(profile, {
        labels: { ...labels, [LABELS.tenant]: 'tenant-b' },
      })
      const r = await other.exec({ ...quick, command: 'cat /home/user/mine.txt 2>/dev/null || echo none' })
      expect(r.stdout).toBe('none\n')
      const own = await fx.provider.create(profile, { labels })
      expect(new TextDecoder().decode(await own.readFile('/home/user/mine.txt'))).toBe('tenant a')
    },
    T,
  )

  test(
    'capturing a destroyed sandbox fails with a clear error',
    async () => {
      const source = await fx.create()
      await fx.provider.destroy(source.ref)
      const err = await rejectionOf(snapshots.capture(source.ref, newSnapshotId(), { labels: fx.labels }))
      expect(err).toMatchObject({ code: expect.stringMatching(/^(SANDBOX_LOST|NOT_FOUND)$/) })
      expect((err as Error).message).toContain(source.ref.id)
    },
    T,
  )
})
