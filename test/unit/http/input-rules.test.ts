import { describe, expect, test } from 'vitest'
import { MAX_ARG_BYTES, MAX_ENV_VARS } from '../../../src/services/input-limits.js'
import { ExecInputSchema, SessionIdSchema, ToolCallInputSchema } from '../../../src/http/schemas.js'
import { Metrics } from '../../../src/metrics.js'
import { assertSessionId } from '../../../src/sessions/session-id.js'

/** The first issue of a failed parse as `path: message`, or undefined when it passed. */
function issue(result: { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }) {
  const i = result.error?.issues[0]
  return result.success ? undefined : `${i?.path.map(String).join('.')}: ${i?.message}`
}

const exec = (extra: Record<string, unknown>) =>
  ExecInputSchema.safeParse({ provider: 'docker', profile: 'default', command: 'true', ...extra })

describe('input rules of the HTTP edge (library level; the proof is test/e2e/input-validation.test.ts)', () => {
  test('session ids: the alphabet, but never a dot segment', () => {
    for (const ok of ['a', '...', '.a', 'a.', 'x'.repeat(128), 'mcp-1f2e'])
      expect(SessionIdSchema.parse(ok)).toBe(ok)
    for (const bad of ['.', '..', '', 'a/b', 'x'.repeat(129), '%2e'])
      expect(SessionIdSchema.safeParse(bad).success).toBe(false)
    expect(() => assertSessionId('..', '--session')).toThrow(/--session.*not "\." or "\.\."/)
  })

  test('exec: NUL, env count and sizes, command bytes', () => {
    expect(issue(exec({ command: 'a\0' }))).toMatch(/^command: must not contain NUL/)
    expect(issue(exec({ cwd: '/a\0' }))).toMatch(/^cwd: must not contain NUL/)
    expect(issue(exec({ env: { A: '\0' } }))).toMatch(/^env\.A: must not contain NUL/)
    const vars = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V${i}`, '']))
    expect(exec({ env: vars(MAX_ENV_VARS) }).success).toBe(true)
    expect(issue(exec({ env: vars(MAX_ENV_VARS + 1) }))).toMatch(/^env: has 2049 variables; at most 2048/)
    expect(exec({ env: { A: 'x'.repeat(MAX_ARG_BYTES - 2) } }).success).toBe(true)
    expect(issue(exec({ env: { A: 'x'.repeat(MAX_ARG_BYTES - 1) } }))).toMatch(/^env\.A: .*at most 131071/)
    expect(exec({ command: `${'é'.repeat(65_535)}x` }).success).toBe(true)
    expect(issue(exec({ command: 'é'.repeat(65_536) }))).toMatch(/^command: is 131072 bytes/)
  })

  test('tool calls: the routed command and cwd, as object or JSON text', () => {
    const call = (args: unknown) => ToolCallInputSchema.safeParse({ name: 'bash', arguments: args })
    expect(issue(call({ command: 'a\0' }))).toMatch(/^arguments\.command: must not contain NUL/)
    expect(issue(call(JSON.stringify({ cmd: ['echo', 'a\0'] })))).toMatch(/^arguments\.command:/)
    expect(issue(call(JSON.stringify({ command: 'ls', cwd: '/\0' })))).toMatch(/^arguments\.cwd:/)
    expect(call({ command: 'ls', cwd: '/tmp' }).success).toBe(true)
    expect(call('not json').success).toBe(true)
  })
})

describe('Metrics.text scoped to a tenant', () => {
  test('only the series of that tenant, in the exposition format', async () => {
    const m = new Metrics()
    m.agentTokens.inc({ tenant: 'acme', kind: 'input' }, 5)
    m.agentTokens.inc({ tenant: 'globex', kind: 'input' }, 7)
    m.agentRuns.inc({ tenant: 'acme', finish_reason: 'a "quoted"\nreason' })
    m.execLatency.observe({ provider: 'docker', profile: 'default', outcome: 'ok' }, 0.1)
    const acme = await m.text({ tenant: 'acme' })
    expect(acme).toBe(
      [
        '# HELP sbx_agent_tokens_total Agent-run tokens',
        '# TYPE sbx_agent_tokens_total counter',
        'sbx_agent_tokens_total{tenant="acme",kind="input"} 5',
        '# HELP sbx_agent_runs_total Finished agent runs',
        '# TYPE sbx_agent_runs_total counter',
        'sbx_agent_runs_total{tenant="acme",finish_reason="a \\"quoted\\"\\nreason"} 1',
        '',
      ].join('\n'),
    )
    expect(await m.text({ tenant: 'nobody' })).toBe('')
    const all = await m.text()
    expect(all).toContain('tenant="globex"')
    expect(all).toContain('sbx_exec_duration_seconds_bucket')
  })
})
