import { describe, expect, test } from 'vitest'
import { META } from '../../../providers/e2b/metadata.js'
import {
  CONFORMANCE_RUN_LABEL,
  LABELS,
  OWNER,
  POOL_LABELS,
  PROVIDER_LABELS,
  SETTINGS_LABELS,
  VOLUME_LABELS,
  ownedLabels,
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

  // Copies outside labels.ts, left where other branches edit them; they must agree until they import it.
  test('the session pool and the E2B provider spell the same keys and owner', () => {
    expect(SESSIONS_OWNER).toBe(OWNER)
    expect(SESSIONS_POOL_LABELS).toEqual(POOL_LABELS)
    expect(META.idleTtlMs).toBe(PROVIDER_LABELS.idleTtlMs)
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
