import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'
import { NUMBERED_LINES, expectHeadMarkerTail } from '../support/numbered-lines.js'

interface JobAnswer {
  state: string
  result?: { exitCode: number | null; stdout: string; stderr: string; truncated: boolean }
}

/**
 * Output past the cap through `node bin/sbx.js serve` on the real engine: 5 MiB of numbered lines
 * under the profile's 1 MiB cap come back as the head, one `[... N bytes dropped ...]` line and the
 * tail (where the error usually is), in a fresh shell and in the persistent one; the model-facing
 * text of a tool call says the output was truncated in the middle.
 */
describe('output past the cap keeps its head and its tail (sbx serve)', () => {
  const scope = uniqueName('headtail')
  let srv: SbxServer

  beforeAll(async () => {
    srv = await startSbxServer('serve', { config: { queue: { prefix: scope } } })
  }, 180_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScope(scope)
  }, 60_000)

  const exec = async (body: Record<string, unknown>): Promise<JobAnswer> => {
    const res = await srv.post('/v1/exec', { provider: 'docker', profile: 'default', ...body })
    expect(res.status).toBe(200)
    return (await res.json()) as JobAnswer
  }

  test.each(['fresh', 'persistent'] as const)(
    '/v1/exec, %s shell: head, marker and tail; stderr and the exit code as usual',
    async (shell) => {
      const job = await exec({
        command: `seq 1 ${NUMBERED_LINES}; echo 'the error at the end' >&2; exit 3`,
        shell,
        sessionId: `ht-${shell}`,
      })
      expect(job.state).toBe('completed')
      expect(job.result).toMatchObject({ exitCode: 3, truncated: true, stderr: 'the error at the end\n' })
      expectHeadMarkerTail(job.result?.stdout ?? '', 1024 * 1024)
    },
    120_000,
  )

  test('a tool call says the output was truncated in the middle and shows the tail', async () => {
    const res = await srv.post('/v1/tool-calls', {
      name: 'bash',
      arguments: { command: `seq 1 ${NUMBERED_LINES}` },
      sessionId: 'ht-tool',
    })
    expect(res.status).toBe(200)
    const answer = (await res.json()) as { output: string }
    expect(answer.output).toContain('[output truncated in the middle')
    expect(answer.output).toMatch(/\n\[\.\.\. \d+ bytes dropped \.\.\.\]\n/)
    expect(answer.output).toContain(`\n${NUMBERED_LINES}\nstderr:`)
  }, 120_000)
})
