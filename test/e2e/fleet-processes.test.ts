import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, startSbxWorker, uniqueName } from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

interface Proc {
  id: string
  pid: number
  state: string
  signal: string | null
}
interface Output {
  process: Proc
  stdout: { data: string; nextOffset: number }
}

/*
 * Background processes in fleet mode: two `sbx api` processes and a `sbx worker` on the shared Redis.
 * A process belongs to its sandbox, not to the channel or the process that started it: started
 * through one API, it is read, fed and killed through the other, outlives the first API's death,
 * and the worker's commands in the same session see it.
 */
describe('background processes through sbx api + sbx worker', () => {
  const scope = uniqueName('fleetprocs')
  const key = `sbx_test_${uniqueName('k').replace(/-/g, '')}`
  let api1: SbxServer
  let api2: SbxServer
  let worker: LineChild

  beforeAll(async () => {
    const config = fleetConfig(scope, { quotas: { requestsPerSecond: 1000 } })
    ;[api1, api2, worker] = await Promise.all([
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxServer('api', { config, env: { SBX_API_KEY: key } }),
      startSbxWorker({ config }),
    ])
  }, 180_000)

  afterAll(async () => {
    await Promise.allSettled([api1?.stop(), api2?.stop(), worker?.stop()])
    await removeScope(scope)
  }, 60_000)

  const json = async <T>(res: Response, status = 200): Promise<T> => {
    const body = await res.text()
    expect(res.status, body).toBe(status)
    return JSON.parse(body) as T
  }

  test('started through one API, read, fed and killed through the other; it outlives the first API', async () => {
    const sid = uniqueName('s')
    await json(await api1.post('/v1/sessions', { id: sid, provider: 'docker', profile: 'default' }), 201)
    const base = `/v1/sessions/${sid}/processes`
    const p = await json<Proc>(
      await api1.post(base, { command: 'while read -r l; do echo "got $l"; done' }),
      201,
    )

    // The first API goes away; the process (in the sandbox) does not.
    await api1.kill()
    const listed = await json<{ processes: Proc[] }>(await api2.fetch(base))
    expect(listed.processes).toEqual([expect.objectContaining({ id: p.id, state: 'running' })])
    await json(await api2.post(`${base}/${p.id}/stdin`, { data: 'one\n' }))
    const o = await json<Output>(await api2.fetch(`${base}/${p.id}/output?waitMs=10000`))
    expect(o.stdout.data).toBe('got one\n')

    // A command the worker runs in the same session sees it.
    const job = await json<{ state: string; result: { stdout: string } }>(
      await api2.post('/v1/exec', {
        provider: 'docker',
        profile: 'default',
        sessionId: sid,
        command: `kill -0 ${p.pid} && echo alive`,
      }),
    )
    expect(job.result.stdout).toBe('alive\n')

    const killed = await json<Proc>(await api2.post(`${base}/${p.id}/signal`, { signal: 'SIGKILL' }))
    expect(killed).toMatchObject({ state: 'exited', signal: 'SIGKILL' })
  }, 180_000)
})
