import Anthropic from '@anthropic-ai/sdk'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { ModelRequest } from '../../../../src/agent/model-client.js'
import { anthropic, type AnthropicOptions } from '../../../../src/agent/models/index.js'
import { appError, modelRequest, neverAborted } from '../../../support/model-requests.js'
import {
  ANTHROPIC_TEST_KEY,
  anthropicError,
  anthropicMessage,
  startAnthropicServer,
  type AnthropicFakeServer,
} from '../../../fakes/model-servers/anthropic-server.js'
import { hang } from '../../../fakes/model-servers/scripted-server.js'

let server: AnthropicFakeServer
beforeEach(async () => {
  server = await startAnthropicServer()
})
afterEach(async () => {
  await server.close()
})

function client(options: Partial<AnthropicOptions> = {}) {
  return anthropic({
    apiKey: ANTHROPIC_TEST_KEY,
    model: 'claude-fake-5',
    baseURL: server.baseURL,
    ...options,
  })
}

const signal = neverAborted
const request = (overrides: Partial<ModelRequest> = {}) => modelRequest('claude-fake-5', overrides)
const retryFast = { 'retry-after-ms': '1' }

describe('anthropic: retries, errors, timeouts, abort', () => {
  test('a 529 overloaded is retried by the SDK, then the call succeeds', async () => {
    server.reply(
      anthropicError(529, 'Overloaded', retryFast),
      anthropicMessage({ content: [{ type: 'text', text: 'recovered' }] }),
    )
    const res = await client({ maxRetries: 2 }).generate(request(), signal())
    expect(res.text).toBe('recovered')
    expect(server.requests.map((r) => r.headers['x-stainless-retry-count'])).toEqual(['0', '1'])
  })

  test('a 500 after every retry: UNAVAILABLE with the API error message', async () => {
    server.reply(
      anthropicError(500, 'Internal server error', retryFast),
      anthropicError(500, 'Internal server error', retryFast),
    )
    const err = await appError(client({ maxRetries: 1 }).generate(request(), signal()))
    expect(server.requests).toHaveLength(2)
    expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
    expect(err.message).toContain('HTTP 500 after 2 attempt(s): Internal server error;')
    expect(err.cause).toBeInstanceOf(Anthropic.InternalServerError)
  })

  test('429 with no retries left: RATE_LIMITED with the API error message', async () => {
    server.reply(anthropicError(429, 'Number of request tokens has exceeded your per-minute rate limit.'))
    const err = await appError(client({ maxRetries: 0 }).generate(request(), signal()))
    expect(err).toMatchObject({ code: 'RATE_LIMITED', retryable: true })
    expect(err.message).toContain('Number of request tokens has exceeded your per-minute rate limit.')
    expect(err.cause).toBeInstanceOf(Anthropic.RateLimitError)
  })

  test('400 is not retried: BAD_REQUEST with the API error message', async () => {
    server.reply(
      anthropicError(400, 'messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks'),
    )
    const err = await appError(client({ maxRetries: 2 }).generate(request(), signal()))
    expect(server.requests).toHaveLength(1)
    expect(err).toMatchObject({ code: 'BAD_REQUEST', retryable: false })
    expect(err.message).toContain('unexpected `tool_use_id` found in `tool_result` blocks')
  })

  test('401 that echoes the key: UNAUTHORIZED, and the key never appears in the message', async () => {
    const wrong = 'sk-ant-wrong-key-7c7c7c'
    const err = await appError(client({ apiKey: wrong }).generate(request(), signal()))
    expect(err.code).toBe('UNAUTHORIZED')
    expect(err.message).toContain('invalid x-api-key: [redacted]')
    expect(err.message).not.toContain(wrong)
  })

  test('a server that never answers: UNAVAILABLE after timeoutMs, bounded', async () => {
    server.reply(hang)
    const started = Date.now()
    const err = await appError(client({ timeoutMs: 150, maxRetries: 0 }).generate(request(), signal()))
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true })
    expect(err.message).toContain("raise 'timeoutMs'")
    expect(err.cause).toBeInstanceOf(Anthropic.APIConnectionTimeoutError)
    await server.requests[0]?.abandoned
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
  })

  test('an already-aborted signal sends nothing', async () => {
    const controller = new AbortController()
    controller.abort(new Error('too late'))
    await expect(client().generate(request(), controller.signal)).rejects.toThrow('too late')
    expect(server.requests).toHaveLength(0)
  })

  test('invalid options fail fast with CONFIG_INVALID', () => {
    expect(() => anthropic({ apiKey: 'k', model: 'm', defaultMaxOutputTokens: 0 })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID' }),
    )
  })
})
