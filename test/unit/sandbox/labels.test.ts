import { describe, expect, test } from 'vitest'
import {
  CONFORMANCE_RUN_LABEL,
  LABELS,
  OWNER,
  POOL_LABELS,
  PROVIDER_LABELS,
  SETTINGS_LABELS,
  VOLUME_LABELS,
  isOwned,
  matchesLabels,
  ownedLabels,
  ownerFilter,
  poolLabels,
  scopeLabels,
  settingsOf,
} from '../../../src/sandbox/labels.js'
import { resolveProfile } from '../../../src/sandbox/profiles.js'
import { OWNER as SESSIONS_OWNER, POOL_LABELS as SESSIONS_POOL_LABELS } from '../../../src/sessions/keys.js'

/** Every key of the label schema, with the group it is declared in. */
const KEYS = Object.entries({ LABELS, SETTINGS_LABELS, POOL_LABELS, VOLUME_LABELS, PROVIDER_LABELS }).flatMap(
  ([group, keys]) => Object.entries(keys).map(([name, key]) => ({ where: `${group}.${name}`, key })),
)

describe('the label schema (src/sandbox/labels.ts)', () => {
  test('every key is namespaced under the owner value', () => {
    for (const { where, key } of [...KEYS, { where: 'CONFORMANCE_RUN_LABEL', key: CONFORMANCE_RUN_LABEL }])
      expect(key, where).toMatch(new RegExp(`^${OWNER}\\.[a-z-]+$`))
  })

  test('no two keys collide, except volumes carrying the pool scope on purpose', () => {
    const seen = new Map<string, string>()
    for (const { where, key } of KEYS) {
      const before = seen.get(key)
      if (before !== undefined)
        expect([before, where].sort(), key).toEqual(['POOL_LABELS.scope', 'VOLUME_LABELS.scope'])
      seen.set(key, where)
    }
  })

  test('the session pool re-exports the same keys and owner', () => {
    expect(SESSIONS_OWNER).toBe(OWNER)
    expect(SESSIONS_POOL_LABELS).toBe(POOL_LABELS)
  })

  // Wire values: sandboxes made by earlier versions must still be recognised (owned, listed, reconnected).
  test('the wire spelling of the keys that find existing sandboxes is fixed', () => {
    expect(OWNER).toBe('sandbox-router')
    expect(LABELS).toEqual({
      owner: 'sandbox-router.owner',
      tenant: 'sandbox-router.tenant',
      session: 'sandbox-router.session',
      profile: 'sandbox-router.profile',
      instance: 'sandbox-router.instance',
    })
    expect(SETTINGS_LABELS).toEqual({ cwd: 'sandbox-router.cwd', maxExecs: 'sandbox-router.max-execs' })
    expect(POOL_LABELS.scope).toBe('sandbox-router.scope')
    expect(POOL_LABELS.createdAt).toBe('sandbox-router.created-at')
    expect(PROVIDER_LABELS.idleTtlMs).toBe('sandbox-router.idle-ttl-ms')
    expect(PROVIDER_LABELS.createId).toBe('sandbox-router.create-id')
    expect(PROVIDER_LABELS.agentPath).toBe('sandbox-router.agent-path')
  })

  test('owner filter, owner check and the re-check of a filter', () => {
    expect(ownerFilter({ a: '1' })).toEqual({ a: '1', [LABELS.owner]: OWNER })
    expect(isOwned({ [LABELS.owner]: OWNER })).toBe(true)
    expect(isOwned({ [LABELS.owner]: 'someone-else' })).toBe(false)
    expect(isOwned(undefined)).toBe(false)
    expect(matchesLabels({ a: '1', b: '2' }, { a: '1' })).toBe(true)
    expect(matchesLabels({ a: '1' }, { a: '1', b: '2' })).toBe(false)
  })

  test('settingsOf reads back what ownedLabels stored, with defaults for missing or bad values', () => {
    const profile = resolveProfile('p', {
      provider: 'docker',
      image: 'img',
      cwd: '/work',
      maxConcurrentExecs: 3,
    })
    expect(settingsOf(ownedLabels({}, profile), '/')).toEqual({ cwd: '/work', maxConcurrentExecs: 3 })
    expect(settingsOf({ [SETTINGS_LABELS.maxExecs]: '-1' }, '/tmp')).toEqual({
      cwd: '/tmp',
      maxConcurrentExecs: 8,
    })
    expect(settingsOf(undefined, '/')).toEqual({ cwd: '/', maxConcurrentExecs: 8 })
  })

  test("the pool's labels and its reaper's filter", () => {
    const labels = poolLabels({
      scope: 's',
      instanceId: 'i',
      profile: 'p',
      session: 'warm',
      now: 5,
      engine: 'e',
    })
    expect(labels).toEqual({
      [LABELS.owner]: OWNER,
      [LABELS.session]: 'warm',
      [LABELS.profile]: 'p',
      [LABELS.instance]: 'i',
      [POOL_LABELS.scope]: 's',
      [POOL_LABELS.createdAt]: '5',
      [POOL_LABELS.engine]: 'e',
    })
    expect(matchesLabels(labels, scopeLabels('s'))).toBe(true)
  })

  test("ownedLabels adds the owner, the profile, the instance and the settings to the caller's", () => {
    const profile = resolveProfile('p', { provider: 'docker', image: 'img', cwd: '/work' })
    expect(ownedLabels({ [LABELS.tenant]: 't' }, profile, 'i-1')).toEqual({
      [LABELS.tenant]: 't',
      [LABELS.owner]: OWNER,
      [LABELS.profile]: 'p',
      [LABELS.instance]: 'i-1',
      [SETTINGS_LABELS.cwd]: '/work',
      [SETTINGS_LABELS.maxExecs]: String(profile.maxConcurrentExecs),
    })
  })
})
