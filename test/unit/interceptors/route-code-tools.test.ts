import { describe, expect, test } from 'vitest'
import { extractCodeCell, routeCodeTools, routeShellTools } from '../../../src/interceptors/builtins/index.js'
import { ToolCallDecision, evaluateToolCall } from '../../../src/interceptors/index.js'
import type { ToolCallRequest } from '../../../src/interceptors/index.js'
import { ExecJobSchema, ExecResultSchema } from '../../../src/queue/schemas.js'
import { QueueRouteExecutor, routeRequestOf } from '../../../src/routing/index.js'
import { formatExecResult } from '../../../src/routing/tool-result.js'
import { createInProcessJobQueue } from '../../../src/queue/index.js'
import { ProfileCatalog, resolveProfile } from '../../../src/sandbox/profiles.js'
import { execResultOfCell } from '../../../src/worker/code-cell.js'

const call = (name: string, args: unknown): ToolCallRequest => ({
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
  callId: 'c1',
  type: 'function',
})

describe('routeCodeTools', () => {
  const ic = routeCodeTools({ providerId: 'docker', profile: 'dev' })

  test('routes python, run_code, execute_python and plugin suffixes as code cells', async () => {
    for (const name of ['python', 'run_code', 'execute_python', 'plugin__nb__python']) {
      const v = await evaluateToolCall([ic], call(name, { code: 'x = 1' }))
      expect(v).toMatchObject({
        kind: 'routeTo',
        route: {
          providerId: 'docker',
          profile: 'dev',
          command: 'x = 1',
          run: { kind: 'code', language: 'python' },
        },
        decidedBy: 'route-code-tools',
      })
    }
    expect((await evaluateToolCall([ic], call('bash', { code: 'x' }))).kind).toBe('allow')
  })

  test('reads code, source, script, input or a bare JSON string; the language argument picks the kernel', () => {
    expect(extractCodeCell(call('python', { code: 'a' }))).toEqual({ code: 'a' })
    expect(extractCodeCell(call('python', { source: 'b' }))).toEqual({ code: 'b' })
    expect(extractCodeCell(call('python', { script: 'c' }))).toEqual({ code: 'c' })
    expect(extractCodeCell(call('python', { input: 'd' }))).toEqual({ code: 'd' })
    expect(extractCodeCell(call('python', '"1 + 1"'))).toEqual({ code: '1 + 1' })
    expect(extractCodeCell(call('run_code', { code: '1', language: 'js' }))).toEqual({
      code: '1',
      language: 'javascript',
    })
    expect(extractCodeCell(call('run_code', { code: '1', language: 'python' }))).toEqual({
      code: '1',
      language: 'python',
    })
    expect(extractCodeCell(call('python', { code: '  ' }))).toBeUndefined()
    expect(extractCodeCell(call('python', 'not json'))).toBeUndefined()
  })

  test('the options language is the default; the call’s language wins', async () => {
    const js = routeCodeTools({
      providerId: 'docker',
      profile: 'dev',
      language: 'javascript',
      tools: ['node'],
    })
    const a = await evaluateToolCall([js], call('node', { code: '1' }))
    expect(a).toMatchObject({ route: { run: { kind: 'code', language: 'javascript' } } })
    const b = await evaluateToolCall([js], call('node', { code: '1', language: 'python' }))
    expect(b).toMatchObject({ route: { run: { kind: 'code', language: 'python' } } })
  })

  test('a call with no code, or an unknown language, is blocked with a reason the model can act on', async () => {
    const none = await evaluateToolCall([ic], call('python', { command: 'ls' }))
    expect(none).toMatchObject({
      kind: 'block',
      reason: 'tool "python" needs code to run: pass arguments like {"code": "print(1 + 1)"}',
    })
    const cobol = await evaluateToolCall([ic], call('run_code', { code: '1', language: 'cobol' }))
    expect(cobol.kind).toBe('block')
    expect(cobol.kind === 'block' && cobol.reason).toMatch(/python or javascript, not "cobol"/)
  })

  test('validates eagerly', () => {
    expect(() => routeCodeTools({ providerId: '', profile: 'dev' })).toThrow(/providerId/)
    expect(() => routeCodeTools({ providerId: 'docker', profile: '' })).toThrow(/profile/)
    expect(() =>
      routeCodeTools({ providerId: 'docker', profile: 'dev', language: 'ruby' as 'python' }),
    ).toThrow(/language must be one of python, javascript/)
    expect(() => routeCodeTools({ providerId: 'docker', profile: 'dev', tools: [] })).toThrow(/tools/)
  })

  test('beside routeShellTools: each takes its own tools', async () => {
    const chain = [routeShellTools({ providerId: 'docker', profile: 'default' }), ic]
    const shell = await evaluateToolCall(chain, call('bash', { command: 'ls' }))
    expect(shell.kind === 'routeTo' && shell.route.run).toBeUndefined()
    const cell = await evaluateToolCall(chain, call('python', { code: '1' }))
    expect(cell.kind === 'routeTo' && cell.route.run).toEqual({ kind: 'code', language: 'python' })
  })
})

describe('ToolCallDecision.routeCode', () => {
  test('is a routeTo verdict carrying the cell; routeTo is unchanged', () => {
    expect(ToolCallDecision.routeCode('docker', 'dev', 'x', 'python')).toEqual({
      kind: 'routeTo',
      providerId: 'docker',
      profile: 'dev',
      command: 'x',
      run: { kind: 'code', language: 'python' },
    })
    expect(ToolCallDecision.routeTo('docker', 'default', 'ls')).toEqual({
      kind: 'routeTo',
      providerId: 'docker',
      profile: 'default',
      command: 'ls',
    })
    expect(() => ToolCallDecision.routeCode('docker', 'dev', ' ', 'python')).toThrow(/code/)
  })
})

describe('a routed cell as a job', () => {
  const targets = new ProfileCatalog(
    ['docker'],
    [resolveProfile('dev', { provider: 'docker', shell: 'persistent', defaultTimeoutMs: 2_000 })],
  )
  const decision = ToolCallDecision.routeCode('docker', 'dev', 'x + 22', 'python')
  if (decision.kind !== 'routeTo') throw new Error('not a route')

  test('the route and its job carry code.language, no cwd and no shell fields', async () => {
    const route = routeRequestOf(decision, call('python', { code: 'x + 22', cwd: '/tmp' }), {
      sessionId: 'nb',
    })
    expect(route).toMatchObject({ command: 'x + 22', code: { language: 'python' }, sessionId: 'nb' })
    expect(route.cwd).toBeUndefined()
    expect(route.shellDefault).toBeUndefined()
    const queue = createInProcessJobQueue()
    try {
      const router = new QueueRouteExecutor({ queue, targets })
      const job = router.buildJob(route, 'j1')
      expect(ExecJobSchema.parse(job)).toMatchObject({ command: 'x + 22', code: { language: 'python' } })
      expect(job.shell).toBeUndefined()
      expect(job.shellDefault).toBeUndefined()
      // A cell and a shell command of one callId are different jobs.
      const { code: _code, ...asShell } = route
      expect(router.jobIdOf(route)).not.toBe(router.jobIdOf(asShell))
    } finally {
      await queue.close()
    }
  })

  test('a worker from before the code field refuses the job instead of running the cell as a shell command', () => {
    const job = {
      jobId: 'j1',
      tenant: 't',
      sessionId: 'nb',
      providerId: 'docker',
      profile: 'dev',
      command: 'x + 22',
      code: { language: 'python' },
      timeoutMs: 1000,
      outputCapBytes: 1024,
      idempotent: false,
      callId: 'c1',
      toolName: 'python',
      submittedAt: 1,
    }
    expect(ExecJobSchema.safeParse(job).success).toBe(true)
    const before = ExecJobSchema.omit({ code: true })
    const old = before.safeParse(job)
    expect(old.success).toBe(false)
    expect(old.error?.issues[0]).toMatchObject({ code: 'unrecognized_keys', keys: ['code'] })
  })
})

describe('model-facing text of a cell', () => {
  const base = {
    language: 'python' as const,
    stdout: '',
    stderr: '',
    text: null,
    outputs: [],
    error: null,
    executionCount: 1,
    timedOut: false,
    truncated: false,
    durationMs: 3,
    kernelRestarted: false,
  }

  test('stdout, stderr, then Out', () => {
    const r = execResultOfCell(
      { ...base, stdout: 'hi\n', text: '42', outputs: [{ type: 'result', data: { 'text/plain': '42' } }] },
      'sb',
    )
    expect(ExecResultSchema.parse(r)).toEqual(r)
    expect(r.exitCode).toBe(0)
    expect(formatExecResult(r)).toBe('stdout:\nhi\nstderr:\n(empty)\nOut: 42')
  })

  test('an exception: exit code 1 and the traceback', () => {
    const tb =
      'Traceback (most recent call last):\n  File "<cell>", line 1\nZeroDivisionError: division by zero\n'
    const r = execResultOfCell(
      { ...base, error: { name: 'ZeroDivisionError', value: 'division by zero', traceback: tb } },
      'sb',
    )
    expect(r.exitCode).toBe(1)
    expect(formatExecResult(r)).toBe(
      'stdout:\n(empty)\nstderr:\n(empty)\nexception: ZeroDivisionError: division by zero\ntraceback:\n' +
        tb.trimEnd(),
    )
  })

  test('restart, timeout, truncation and rich outputs are said', () => {
    const r = execResultOfCell(
      {
        ...base,
        kernelRestarted: true,
        timedOut: true,
        truncated: true,
        outputs: [{ type: 'display', data: { 'image/png': 'AAA', 'text/plain': '<Figure>' } }],
      },
      'sb',
    )
    expect(r.code?.outputs).toEqual([{ type: 'display', mimeTypes: ['image/png', 'text/plain'] }])
    expect(formatExecResult(r, { timeoutMs: 500 })).toBe(
      [
        '[kernel restarted: variables, imports and definitions of earlier cells are gone]',
        '[timed out after 500 ms; the cell was interrupted]',
        "[output truncated: the cell's output past 1 MiB per stream was dropped]",
        'stdout:',
        '(empty)',
        'stderr:',
        '(empty)',
        'outputs: display image/png, text/plain',
      ].join('\n'),
    )
  })
})
