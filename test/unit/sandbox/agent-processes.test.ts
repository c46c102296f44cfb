import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { AgentProcesses } from '../../../src/sandbox/agent-processes.js'
import type { ExecRequest, ExecResult } from '../../../src/sandbox/types.js'

const RAW = {
  id: 'p-1',
  command: 'seq 1 9',
  pid: 42,
  state: 'running',
  exitCode: null,
  signal: null,
  startedAt: 1,
  endedAt: null,
  stdinClosed: false,
  stdoutBytes: 0,
  stderrBytes: 0,
}

/** An agent stand-in: answers `--proc-start` (recording each command line) as `agent` says. */
function fakeAgent(agent: (command: string) => unknown): {
  processes: AgentProcesses
  commands: string[]
} {
  const commands: string[] = []
  const run = (request: ExecRequest): Promise<ExecResult> => {
    commands.push(request.command)
    return Promise.resolve({
      stdout: `${JSON.stringify(agent(request.command))}\n`,
      stderr: '',
      exitCode: 0,
      timedOut: false,
      truncated: false,
      durationMs: 1,
      sandboxId: 'sb-1',
    })
  }
  return { processes: new AgentProcesses(run, '/agent', 'sb-1'), commands }
}

const start = { command: 'seq 1 9', outputBufferBytes: 65_536, maxRunning: 8 }

describe('AgentProcesses: the backpressure flag of a start', () => {
  test('is a fifth argument, its idle time, only when asked for', async () => {
    const { processes, commands } = fakeAgent(() => RAW)
    await processes.start('p-1', start)
    await processes.start('p-1', { ...start, backpressure: true })
    await processes.start('p-1', { ...start, backpressure: true, backpressureIdleMs: 900 })
    expect(commands[0]).toMatch(/'--proc-start' '\S+' 'p-1' '65536' '8'$/)
    expect(commands[1]).toMatch(/'--proc-start' '\S+' 'p-1' '65536' '8' '15000'$/)
    expect(commands[2]).toMatch(/'--proc-start' '\S+' 'p-1' '65536' '8' '900'$/)
  })

  test('an agent that predates it starts the process without it, and is not asked again', async () => {
    const { processes, commands } = fakeAgent((command) =>
      command.endsWith(`'15000'`)
        ? { error: 'BAD_REQUEST', message: 'unknown or malformed --proc-start invocation (6 arguments)' }
        : RAW,
    )
    expect(await processes.start('p-1', { ...start, backpressure: true })).toMatchObject({
      id: 'p-1',
      pid: 42,
    })
    expect(await processes.start('p-2', { ...start, backpressure: true })).toMatchObject({ id: 'p-1' })
    expect(commands.map((c) => c.endsWith(`'15000'`))).toEqual([true, false, false])
  })

  test('other errors of a start with it stay what they are', async () => {
    const { processes } = fakeAgent(() => ({
      error: 'LIMIT',
      message: '8 processes are running in this session',
    }))
    const err = await processes.start('p-1', { ...start, backpressure: true }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(AppError)
    expect(err).toMatchObject({ code: 'QUOTA_EXCEEDED', message: '8 processes are running in this session' })
  })
})
