import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'
import { removeScopeContainers, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * F6: `/metrics` through `sbx serve` with three keys — tenants acme and globex, and an admin key of
 * tenant ops. Each tenant finishes an agent run (so both have `sbx_agent_*{tenant=…}` series). A
 * tenant's key reads only its own tenant's series: none of the other tenant's, and no fleet-wide
 * series (they sum every tenant's activity). The admin key reads everything; no key is a 401.
 */

const tag = randomBytes(6).toString('hex')
const KEYS = {
  acme: `acme-met-${tag}-0123456789abcdef`,
  globex: `globex-met-${tag}-0123456789abcdef`,
  ops: `ops-met-${tag}-0123456789abcdef`,
}
const MODEL_KEY = `sk-met-${tag}-model-secret`
const prefix = uniqueName('metten')
let model: OpenAIFakeServer
let srv: SbxServer

beforeAll(async () => {
  model = await startOpenAIServer(MODEL_KEY)
  srv = await startSbxServer('serve', {
    config: {
      queue: { prefix },
      apiKeys: [
        { keyEnv: 'MET_ACME_KEY', tenant: 'acme' },
        { keyEnv: 'MET_GLOBEX_KEY', tenant: 'globex' },
        { keyEnv: 'MET_OPS_KEY', tenant: 'ops', admin: true },
      ],
      models: {
        default: {
          kind: 'openai-compatible',
          model: 'gpt-fake',
          baseURL: model.baseURL,
          apiKeyEnv: 'MET_MODEL_KEY',
        },
      },
    },
    env: {
      MET_ACME_KEY: KEYS.acme,
      MET_GLOBEX_KEY: KEYS.globex,
      MET_OPS_KEY: KEYS.ops,
      MET_MODEL_KEY: MODEL_KEY,
    },
  })
}, 120_000)

afterAll(async () => {
  await srv?.stop()
  await model?.close()
  await removeScopeContainers(prefix)
}, 60_000)

/** One agent run of `tenant` that answers at once, with token usage; resolves when it has ended. */
async function finishRun(tenant: 'acme' | 'globex', promptTokens: number): Promise<void> {
  model.reply(
    chatCompletion({ content: 'done', usage: { prompt_tokens: promptTokens, completion_tokens: 3 } }),
  )
  const created = await srv.post('/v1/agent-runs', { input: 'say done' }, { key: KEYS[tenant] })
  expect(created.status).toBe(202)
  const { id } = (await created.json()) as { id: string }
  expect(await (await srv.fetch(`/v1/agent-runs/${id}/events`, { key: KEYS[tenant] })).text()).toContain(
    'event: end',
  )
  expect(await (await srv.fetch(`/v1/agent-runs/${id}`, { key: KEYS[tenant] })).json()).toMatchObject({
    state: 'completed',
  })
}

async function scrape(key?: string): Promise<{ status: number; text: string }> {
  const res = key
    ? await srv.fetch('/metrics', { key })
    : await fetch(`${srv.url}/metrics`, { headers: { authorization: '' } })
  return { status: res.status, text: await res.text() }
}

/** The sample lines of an exposition (no comments). */
const samples = (text: string): string[] => text.split('\n').filter((l) => l && !l.startsWith('#'))

describe('/metrics is tenant-scoped (cross-tenant reads are admin scope)', () => {
  test("a tenant's key sees only its own tenant's series; the admin key sees all; no key is 401", async () => {
    await finishRun('acme', 11)
    await finishRun('globex', 22)

    const acme = await scrape(KEYS.acme)
    expect(acme.status).toBe(200)
    expect(acme.text).toContain('sbx_agent_runs_total{tenant="acme",finish_reason="natural_stop"} 1')
    expect(acme.text).toContain('sbx_agent_tokens_total{tenant="acme",kind="input"} 11')
    expect(acme.text).not.toContain('globex')
    // Only series labelled with the caller's tenant: no fleet-wide or process series.
    expect(samples(acme.text).length).toBeGreaterThan(0)
    for (const line of samples(acme.text)) expect(line).toMatch(/[{,]tenant="acme"[,}]/)

    const globex = await scrape(KEYS.globex)
    expect(globex.status).toBe(200)
    expect(globex.text).toContain('sbx_agent_tokens_total{tenant="globex",kind="input"} 22')
    expect(globex.text).not.toContain('acme')
    expect(globex.text).not.toContain('sbx_queue_depth')
    expect(globex.text).not.toContain('sbx_process_')

    const ops = await scrape(KEYS.ops)
    expect(ops.status).toBe(200)
    expect(ops.text).toContain('tenant="acme"')
    expect(ops.text).toContain('tenant="globex"')
    expect(ops.text).toContain('sbx_exec_duration_seconds')
    expect(ops.text).toContain('sbx_process_')

    const anonymous = await scrape()
    expect(anonymous.status).toBe(401)
    expect(anonymous.text).not.toContain('acme')
  }, 120_000)
})
