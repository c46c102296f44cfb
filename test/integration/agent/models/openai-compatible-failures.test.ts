import OpenAI from 'openai'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { ModelRequest } from '../../../../src/agent/model-client.js'
import { openAICompatible, type OpenAICompatibleOptions } from '../../../../src/agent/models/index.js'
import { AppError } from '../../../../src/errors.js'
import { appError, modelRequest, neverAborted, SHELL_TOOL } from '../../../support/model-requests.js'
import {
  chatCompletion,
  OPENAI_TEST_KEY,
  openAIError,
  startOpenAIServer,
  type OpenAIFakeServer,
} from '../../../fakes/model-servers/openai-server.js'
import { hang } from '../../../fakes/model-servers/scripted-server.js'

let server: OpenAIFakeServer
beforeEach(async () => {
  server = await startOpenAIServer()
})
afterEach(async () => {
  await server.close()
})

function client(options: Partial<OpenAICompatibleOptions> = {}) {
  return openAICompatible({ apiKey: OPENAI_TEST_KEY, model: 'gpt-fake', baseURL: server.baseURL, ...options })
}

const signal = neverAborted
const request = (overrides: Partial<ModelRequest> = {}) => modelRequest('gpt-fake', overrides)

describe('openAICompatible: retries, errors, timeouts, abort', () => {
  test('a 500 is retried by the SDK, then the call succeeds', async () => {
    server.reply(
      openAIError(500, 'The server had an error while processing your request.', {
        headers: { 'retry-after-ms': '1' },
      }),
      chatCompletion({ content: 'recovered' }),
    )
    const res = await client({ maxRetries: 2 }).generate(request(), signal())
    expect(res.text).toBe('recovered')
    expect(server.requests).toHaveLength(2)
    expect(server.requests.map((r) => r.headers['x-stainless-retry-count'])).toEqual(['0', '1'])
    expect(server.requests[1]?.body).toEqual(server.requests[0]?.body)
  })

  test('5xx after every retry: UNAVAILABLE, retryable, with the provider message', async () => {
    const busy = openAIError(503, 'Engine is currently overloaded.', { headers: { 'retry-after-ms': '1' } })
    server.reply(busy, busy)
    const err = await appError(client({ maxRetries: 1 }).generate(request(), signal()))
    expect(server.requests).toHaveLength(2)
    expect(err.code).toBe('UNAVAILABLE')
    expect(err.retryable).toBe(true)
    expect(err.message).toContain('Engine is currently overloaded.')
    expect(err.message).toContain('HTTP 503 after 2 attempt(s)')
    expect(err.cause).toBeInstanceOf(OpenAI.InternalServerError)
  })

  test('429 with no retries left: RATE_LIMITED with the provider message', async () => {
    server.reply(
      openAIError(429, 'Rate limit reached for gpt-fake on tokens per min.', { code: 'rate_limit_exceeded' }),
    )
    const err = await appError(client({ maxRetries: 0 }).generate(request(), signal()))
    expect(server.requests).toHaveLength(1)
    expect(err).toMatchObject({ code: 'RATE_LIMITED', retryable: true })
    expect(err.message).toContain('Rate limit reached for gpt-fake on tokens per min.')
    expect(err.cause).toBeInstanceOf(OpenAI.RateLimitError)
  })

  test('400 is not retried: BAD_REQUEST with the provider message', async () => {
    server.reply(
      openAIError(
        400,
        "Invalid schema for function 'bash': 'object' is not valid under any of the given schemas.",
      ),
    )
    const err = await appError(client({ maxRetries: 2 }).generate(request({ tools: [SHELL_TOOL] }), signal()))
    expect(server.requests).toHaveLength(1)
    expect(err).toMatchObject({ code: 'BAD_REQUEST', retryable: false })
    expect(err.message).toContain("Invalid schema for function 'bash'")
  })

  test('401 that echoes the key: UNAUTHORIZED, and the key never appears in the message', async () => {
    const leaky = 'sk-test-wrong-key-4a4a4a4a'
    const err = await appError(client({ apiKey: leaky }).generate(request(), signal()))
    expect(err.code).toBe('UNAUTHORIZED')
    expect(err.message).toContain('Incorrect API key provided')
    expect(err.message).toContain('[redacted]')
    expect(err.message).not.toContain(leaky)
  })

  test('a server that never answers: UNAVAILABLE after timeoutMs, bounded', async () => {
    server.reply(hang)
    const started = Date.now()
    const err = await appError(client({ timeoutMs: 150, maxRetries: 0 }).generate(request(), signal()))
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
    expect(err.message).toContain("within 150 ms (1 attempt(s)); raise 'timeoutMs'")
    expect(err.cause).toBeInstanceOf(OpenAI.APIConnectionTimeoutError)
    await server.requests[0]?.abandoned
  })

  test('timed-out attempts are retried as the SDK documents', async () => {
    server.reply(hang, hang)
    const err = await appError(client({ timeoutMs: 100, maxRetries: 1 }).generate(request(), signal()))
    expect(err.code).toBe('UNAVAILABLE')
    expect(server.requests).toHaveLength(2)
  })

  test('an unreachable server: UNAVAILABLE naming the base URL', async () => {
    const gone = await startOpenAIServer()
    await gone.close()
    const err = await appError(
      openAICompatible({
        apiKey: OPENAI_TEST_KEY,
        model: 'm',
        baseURL: gone.baseURL,
        maxRetries: 0,
      }).generate(request(), signal()),
    )
    expect(err.code).toBe('UNAVAILABLE')
    expect(err.message).toContain(gone.baseURL)
    expect(err.cause).toBeInstanceOf(OpenAI.APIConnectionError)
  })

  test('abort via the signal cancels the HTTP request and rethrows the reason', async () => {
    server.reply(hang)
    const controller = new AbortController()
    const pending = client().generate(request(), controller.signal)
    const seen = await server.requestAt(0)
    const reason = new Error('run cancelled')
    controller.abort(reason)
    await expect(pending).rejects.toBe(reason)
    await seen.abandoned
    expect(server.requests).toHaveLength(1)
  })

  test('an already-aborted signal sends nothing', async () => {
    const controller = new AbortController()
    controller.abort(new Error('too late'))
    await expect(client().generate(request(), controller.signal)).rejects.toThrow('too late')
    expect(server.requests).toHaveLength(0)
  })

  test('invalid options fail fast with CONFIG_INVALID, without echoing the key', () => {
    const act = () => openAICompatible({ apiKey: 'sk-secret-value', model: '', timeoutMs: -1 })
    expect(act).toThrow(AppError)
    try {
      act()
    } catch (err) {
      expect(err).toMatchObject({ code: 'CONFIG_INVALID' })
      expect((err as Error).message).toMatch(/'model'.*'timeoutMs'/)
      expect((err as Error).message).not.toContain('sk-secret-value')
    }
  })
})
