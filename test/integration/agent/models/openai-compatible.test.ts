import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { ModelRequest } from '../../../../src/agent/model-client.js'
import { openAICompatible, type OpenAICompatibleOptions } from '../../../../src/agent/models/index.js'
import { modelRequest, neverAborted, SHELL_TOOL } from '../../../support/model-requests.js'
import {
  chatCompletion,
  OPENAI_TEST_KEY,
  startOpenAIServer,
  type OpenAIFakeServer,
} from '../../../fakes/model-servers/openai-server.js'

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

describe('openAICompatible: request mapping', () => {
  test('plain text: system text, sampling options and max tokens reach the wire', async () => {
    server.reply(chatCompletion({ content: 'Two files.', model: 'gpt-fake-2026-01-01' }))
    const res = await client().generate(
      request({
        systemPrompt: 'You are terse.',
        instructions: 'Answer in one line.',
        temperature: 0.2,
        topP: 0.9,
        maxOutputTokens: 128,
      }),
      signal(),
    )
    expect(res).toEqual({ text: 'Two files.', model: 'gpt-fake-2026-01-01', finishReason: 'stop' })

    const [seen] = server.requests
    expect(seen?.path).toBe('/v1/chat/completions')
    expect(seen?.headers.authorization).toBe(`Bearer ${OPENAI_TEST_KEY}`)
    expect(seen?.body).toEqual({
      model: 'gpt-fake',
      messages: [
        { role: 'system', content: 'You are terse.\n\nAnswer in one line.' },
        { role: 'user', content: 'List the files.' },
      ],
      temperature: 0.2,
      top_p: 0.9,
      max_completion_tokens: 128,
    })
  })

  test('conversation with tool calls, tool results and tools schema', async () => {
    server.reply(chatCompletion({ content: 'Done.' }))
    await client().generate(
      request({
        model: 'gpt-other',
        systemPrompt: 'Be careful.',
        messages: [
          { role: 'user', content: 'Show a and b.' },
          {
            role: 'assistant',
            content: 'Reading both.',
            toolCalls: [
              { id: 'call_1', name: 'bash', arguments: '{"command":"cat a"}' },
              { id: 'call_2', name: 'bash', arguments: '{"command":"cat b"}' },
            ],
          },
          { role: 'tool', toolCallId: 'call_1', name: 'bash', content: 'exit_code: 0' },
          { role: 'tool', toolCallId: 'call_2', name: 'bash', content: 'exit_code: 1' },
          { role: 'assistant', toolCalls: [{ id: 'call_3', name: 'bash', arguments: '{"command":"ls"}' }] },
          { role: 'tool', toolCallId: 'call_3', name: 'bash', content: '' },
          { role: 'system', content: 'Summary of earlier turns.' },
        ],
        tools: [SHELL_TOOL],
      }),
      signal(),
    )
    expect(server.requests[0]?.body).toEqual({
      model: 'gpt-other',
      messages: [
        { role: 'system', content: 'Be careful.' },
        { role: 'user', content: 'Show a and b.' },
        {
          role: 'assistant',
          content: 'Reading both.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"cat a"}' } },
            { id: 'call_2', type: 'function', function: { name: 'bash', arguments: '{"command":"cat b"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'exit_code: 0' },
        { role: 'tool', tool_call_id: 'call_2', content: 'exit_code: 1' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_3', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_3', content: '' },
        { role: 'system', content: 'Summary of earlier turns.' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'bash', description: SHELL_TOOL.description, parameters: SHELL_TOOL.parameters },
        },
      ],
    })
  })

  test("systemRole 'developer' and maxTokensField 'max_tokens' for other servers", async () => {
    server.reply(chatCompletion({ content: 'ok' }))
    await client({ systemRole: 'developer', maxTokensField: 'max_tokens' }).generate(
      request({ systemPrompt: 'S', messages: [{ role: 'system', content: 'T' }], maxOutputTokens: 64 }),
      signal(),
    )
    expect(server.requests[0]?.body).toMatchObject({
      messages: [
        { role: 'developer', content: 'S' },
        { role: 'developer', content: 'T' },
      ],
      max_tokens: 64,
    })
    expect(server.requests[0]?.body).not.toHaveProperty('max_completion_tokens')
  })
})

describe('openAICompatible: response mapping', () => {
  test('parallel tool calls keep their order and raw JSON arguments', async () => {
    server.reply(
      chatCompletion({
        toolCalls: [
          { id: 'call_a', name: 'bash', arguments: '{"command": "ls -la"}' },
          { id: 'call_b', name: 'read_file', arguments: '{"path":"/etc/hosts"}' },
        ],
      }),
    )
    const res = await client().generate(request({ tools: [SHELL_TOOL] }), signal())
    expect(res.finishReason).toBe('tool_calls')
    expect(res.text).toBeUndefined()
    expect(res.toolCalls).toEqual([
      { id: 'call_a', name: 'bash', arguments: '{"command": "ls -la"}' },
      { id: 'call_b', name: 'read_file', arguments: '{"path":"/etc/hosts"}' },
    ])
  })

  test('tool calls under finish_reason "stop" (some servers) still report tool_calls', async () => {
    server.reply(
      chatCompletion({ toolCalls: [{ id: 'c', name: 'bash', arguments: '{}' }], finishReason: 'stop' }),
    )
    expect((await client().generate(request(), signal())).finishReason).toBe('tool_calls')
  })

  test('usage details: cached input and reasoning tokens', async () => {
    server.reply(
      chatCompletion({
        content: 'ok',
        usage: {
          prompt_tokens: 2048,
          completion_tokens: 400,
          total_tokens: 2448,
          prompt_tokens_details: { cached_tokens: 1536, audio_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 320, audio_tokens: 0 },
        },
      }),
    )
    const res = await client().generate(request(), signal())
    expect(res.usage).toEqual({
      inputTokens: 2048,
      outputTokens: 400,
      totalTokens: 2448,
      cachedInputTokens: 1536,
      cacheWriteInputTokens: 0,
      reasoningTokens: 320,
    })
  })

  test('usage without details counts them as 0', async () => {
    server.reply(chatCompletion({ content: 'ok', usage: { prompt_tokens: 12, completion_tokens: 3 } }))
    expect((await client().generate(request(), signal())).usage).toEqual({
      inputTokens: 12,
      outputTokens: 3,
      totalTokens: 15,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
      reasoningTokens: 0,
    })
  })

  test("finish_reason 'length' -> 'length' (the loop's token_limit)", async () => {
    server.reply(chatCompletion({ content: 'The files are: a, b, c, d, e, f', finishReason: 'length' }))
    const res = await client().generate(request({ maxOutputTokens: 8 }), signal())
    expect(res).toMatchObject({ text: 'The files are: a, b, c, d, e, f', finishReason: 'length' })
  })

  test("a refusal is the text, with finishReason 'content_filter'", async () => {
    server.reply(chatCompletion({ content: null, refusal: 'I cannot help with that.' }))
    expect(await client().generate(request(), signal())).toMatchObject({
      text: 'I cannot help with that.',
      finishReason: 'content_filter',
    })
  })
})
