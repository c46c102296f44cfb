import { describe, expect, test } from 'vitest'
import { buildContainerSpec } from '../../../providers/docker/container-spec.js'
import { DockerProviderOptionsSchema } from '../../../providers/docker/options.js'
import { workspaceVolumeName } from '../../../providers/docker/workspace.js'
import { ProfileSchema, resolveProfile } from '../../../src/sandbox/index.js'

describe('workspace profile option', () => {
  test('defaults to a tmpfs workspace', () => {
    expect(resolveProfile('p', { provider: 'docker' }).workspace).toEqual({ persistent: false })
  })

  test('a persistent workspace with a warm pool is refused, naming the fix', () => {
    const r = ProfileSchema.safeParse({
      provider: 'docker',
      workspace: { persistent: true },
      pool: { minIdle: 1 },
    })
    expect(r.success).toBe(false)
    expect(r.error?.issues[0]?.path).toEqual(['pool', 'minIdle'])
    expect(r.error?.issues[0]?.message).toContain('workspace.persistent')
  })

  test('unknown workspace fields are refused', () => {
    expect(ProfileSchema.safeParse({ provider: 'docker', workspace: { persist: true } }).success).toBe(false)
  })

  test('a volume replaces the workspace tmpfs, and leaves the memory limit to memoryMb and /tmp', () => {
    const profile = resolveProfile('p', { provider: 'docker', workspace: { persistent: true } })
    const opts = DockerProviderOptionsSchema.parse({})
    const spec = buildContainerSpec(profile, 'img', {}, opts, { path: '/agent' }, { workspaceVolume: 'sbx-ws-x' })
    expect(Object.keys(spec.HostConfig?.Tmpfs ?? {})).toEqual(['/tmp'])
    expect(spec.HostConfig?.Mounts).toEqual([
      expect.objectContaining({ Type: 'volume', Source: 'sbx-ws-x', Target: '/workspace' }),
    ])
    expect(spec.HostConfig?.Memory).toBe((512 + opts.tmpSizeMb) * 1024 * 1024)
  })

  test('volume names: per scope and session, none for warm or ephemeral sandboxes', () => {
    const a = workspaceVolumeName({ 'sandbox-router.session': 'h1', 'sandbox-router.scope': 's1' })
    const b = workspaceVolumeName({ 'sandbox-router.session': 'h1', 'sandbox-router.scope': 's2' })
    expect(a).toMatch(/^sbx-ws-[0-9a-f]{24}$/)
    expect(a).not.toBe(b)
    expect(workspaceVolumeName({ 'sandbox-router.session': 'warm' })).toBeUndefined()
    expect(workspaceVolumeName({ 'sandbox-router.session': 'ephemeral' })).toBeUndefined()
  })
})
