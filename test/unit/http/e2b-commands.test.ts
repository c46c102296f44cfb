import { describe, expect, test } from 'vitest'
import { ConnectRpcError } from '../../../src/http/e2b/connect.js'
import { lossOf } from '../../../src/http/e2b/output-loss.js'
import { commandLineOf } from '../../../src/http/e2b/process-rpc.js'
import { ToolCallDecision, type ToolCallInterceptor } from '../../../src/interceptors/index.js'
import { routeShellTools } from '../../../src/interceptors/builtins/index.js'
import { e2bCommandPolicy } from '../../../src/services/e2b/policy.js'

describe('the command line of an envd process config', () => {
  test("the SDK's `bash -l -c <script>` is the script", () => {
    expect(commandLineOf({ cmd: '/bin/bash', args: ['-l', '-c', 'echo hi; ls'], envs: {} })).toBe(
      'echo hi; ls',
    )
    expect(commandLineOf({ cmd: 'sh', args: ['-c', 'true'], envs: {} })).toBe('true')
  })

  test('any other argv is shell-quoted', () => {
    expect(commandLineOf({ cmd: 'printf', args: ['%s\n', "it's"], envs: {} })).toBe(
      `printf '%s\n' 'it'\\''s'`,
    )
    expect(commandLineOf({ cmd: '/bin/bash', args: ['-c', 'x', 'extra'], envs: {} })).toBe(
      '/bin/bash -c x extra',
    )
  })
})

describe('the tool-call policy of E2B commands', () => {
  const blockRm: ToolCallInterceptor = {
    name: 'no-rm',
    beforeToolCall: (req) =>
      (JSON.parse(req.arguments) as { command: string }).command.startsWith('rm ')
        ? ToolCallDecision.block('no rm here')
        : ToolCallDecision.allow(),
  }
  const chain = [routeShellTools({ providerId: 'docker', profile: 'default' }), blockRm]

  test("interceptors after the host's routeTo still see the command (and may block it)", async () => {
    expect(await e2bCommandPolicy(chain, 't', 'sb', 'rm -rf /')).toEqual({
      kind: 'block',
      reason: 'no rm here',
    })
    expect(await e2bCommandPolicy(chain, 't', 'sb', 'ls')).toEqual({ kind: 'run', command: 'ls' })
  })

  test('a modify runs the rewritten command', async () => {
    const rewrite: ToolCallInterceptor = {
      name: 'rewrite',
      beforeToolCall: () => ToolCallDecision.modify(null, JSON.stringify({ command: 'echo safe' })),
    }
    expect(await e2bCommandPolicy([rewrite, ...chain], 't', 'sb', 'rm -rf /')).toEqual({
      kind: 'run',
      command: 'echo safe',
    })
  })
})

describe('output a process stream did not get', () => {
  const slice = (dropped: number) => ({ data: 'x', offset: dropped, nextOffset: dropped + 1, dropped })
  const info = {
    id: 'p-1',
    command: 'seq 1 9',
    pid: 7,
    state: 'running' as const,
    exitCode: null,
    signal: null,
    startedAt: 0,
    endedAt: null,
    stdinClosed: false,
    stdoutBytes: 0,
    stderrBytes: 0,
  }

  test('nothing dropped is no error', () => {
    expect(lossOf({ process: info, stdout: slice(0), stderr: slice(0) }, 7)).toBeUndefined()
  })

  test('dropped bytes are a data_loss error that says how many, of which stream, and what to do', () => {
    const err = lossOf({ process: info, stdout: slice(4096), stderr: slice(12) }, 7)
    expect(err).toBeInstanceOf(ConnectRpcError)
    expect(err?.code).toBe('data_loss')
    expect(err?.message).toMatch(/^4096 bytes of stdout and 12 bytes of stderr of process 7 were lost/)
    expect(err?.message).toMatch(/one stream/)
    expect(err?.message).toMatch(/quotas\.processOutputBytes/)
  })
})
