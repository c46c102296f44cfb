import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { loadConfig } from '../../src/config/load.js'
import { createLogger } from '../../src/logger.js'
import { createRuntime } from '../../src/runtime/create-runtime.js'
import type { Runtime } from '../../src/runtime/create-runtime.js'
import { startServer } from '../../src/cli/serve.js'
import type { RunningServer } from '../../src/cli/serve.js'
import { OPENAI_TEST_KEY, chatCompletion, startOpenAIServer } from '../fakes/model-servers/openai-server.js'
import type { OpenAIFakeServer } from '../fakes/model-servers/openai-server.js'

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
const KEY = 'fleet-key-0123456789abcdef'

describe.each(['bullmq', 'redis'] as const)(
  'fleet mode (queue driver %s): API, exec worker and agent worker as separate runtimes on one Redis',
  (driver) => {
    const prefix = `fleet${driver[0]}${process.pid}${Date.now().toString(36)}`
    let model: OpenAIFakeServer
    let api: Runtime
    let worker: Runtime
    let agentWorker: Runtime
    let server: RunningServer

    beforeAll(async () => {
      model = await startOpenAIServer()
      const dir = mkdtempSync(join(tmpdir(), 'sbx-fleet-'))
      writeFileSync(
        join(dir, 'sandbox-router.config.json'),
        JSON.stringify({
          // redis: what REDIS_URL selects when the file names no driver; bullmq: named in the file.
          ...(driver === 'bullmq' ? { queue: { driver } } : {}),
          models: {
            default: {
              kind: 'openai-compatible',
              model: 'gpt-fake',
              baseURL: model.baseURL,
              apiKeyEnv: 'FLEET_KEY',
            },
          },
        }),
      )
      const loaded = loadConfig({ cwd: dir, env: { REDIS_URL } })
      expect(loaded.config.queue.driver).toBe(driver)
      const logger = createLogger({ level: 'silent' })
      const env = { FLEET_KEY: OPENAI_TEST_KEY }
      // Three roles of the fleet, as `sbx api`, `sbx worker` and `sbx worker --agent` run them, sharing one Redis.
      api = await createRuntime(loaded, { role: 'api', prefix, logger, env })
      worker = await createRuntime(loaded, { role: 'worker', prefix, logger, env })
      agentWorker = await createRuntime(loaded, { role: 'api', agentWorker: true, prefix, logger, env })
      server = await startServer(api, { port: 0, host: '127.0.0.1', keys: [{ key: KEY, tenant: 'fleet' }] })
    }, 120_000)

    afterAll(async () => {
      await server?.close()
      for (const r of [agentWorker, worker, api]) await r?.close({ deadlineMs: 5_000 })
      await model?.close()
      const redis = new Redis(REDIS_URL)
      const keys = await redis.keys(`${prefix}:*`)
      if (keys.length) await redis.del(...keys)
      await redis.quit()
    }, 60_000)

    const call = (path: string, init: RequestInit = {}): Promise<Response> =>
      fetch(`${server.url}${path}`, {
        ...init,
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          ...(init.headers as Record<string, string>),
        },
      })

    test('the API process has no worker; a command runs on the worker and files persist per session', async () => {
      expect(api.worker).toBeUndefined()
      const run = (command: string) =>
        call('/v1/exec', {
          method: 'POST',
          body: JSON.stringify({ provider: 'docker', profile: 'default', sessionId: 'fleet-1', command }),
        }).then((r) => r.json() as Promise<{ state: string; result: { stdout: string } }>)
      expect((await run('echo fleet > f.txt')).state).toBe('completed')
      expect((await run('cat f.txt')).result.stdout).toBe('fleet\n')
      const list = (await (await call('/v1/sessions')).json()) as { sessions: { id: string }[] }
      expect(list.sessions.map((s) => s.id)).toContain('fleet-1')
      expect((await call('/v1/sessions/fleet-1', { method: 'DELETE' })).status).toBe(200)
    })

    test('an agent run goes through the agent-run queue and its shell through the exec queue', async () => {
      model.reply(
        chatCompletion({
          toolCalls: [{ id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'echo via-fleet' }) }],
        }),
        chatCompletion({ content: 'done via fleet' }),
      )
      const { id } = (await (
        await call('/v1/agent-runs', { method: 'POST', body: JSON.stringify({ input: 'go' }) })
      ).json()) as { id: string }
      const events = await (await call(`/v1/agent-runs/${id}/events`)).text()
      expect(events).toContain('event: end')
      const run = (await (await call(`/v1/agent-runs/${id}`)).json()) as {
        state: string
        output: string
        toolCalls: { routed: boolean }[]
      }
      expect(run).toMatchObject({ state: 'completed', output: 'done via fleet' })
      expect(run.toolCalls[0]?.routed).toBe(true)
      const tool = (
        model.requests[1]?.body as { messages: { role: string; content: string }[] }
      ).messages.find((m) => m.role === 'tool')
      expect(tool?.content).toContain('via-fleet')
    })

    test('readiness reports the queue and the provider', async () => {
      const r = (await (await fetch(`${server.url}/readyz`)).json()) as {
        ok: boolean
        checks: Record<string, { ok: boolean }>
      }
      expect(r.ok).toBe(true)
      expect(Object.keys(r.checks)).toEqual(expect.arrayContaining(['queue', 'docker']))
    })
  },
)
