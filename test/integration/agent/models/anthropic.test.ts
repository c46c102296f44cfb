import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import type { ModelRequest } from '../../../../src/agent/model-client.js'
import { anthropic, type AnthropicOptions } from '../../../../src/agent/models/index.js'
import { modelRequest, neverAborted, SHELL_TOOL } from '../../../support/model-requests.js'
import {
  ANTHROPIC_TEST_KEY,
  anthropicMessage,
  startAnthropicServer,
  type AnthropicFakeServer,
} from '../../../fakes/model-servers/anthropic-server.js'

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

describe('anthropic: request mapping', () => {
  test('plain text: system blocks, default max_tokens, cache_control; no sampling parameters', async () => {
    server.reply(anthropicMessage({ content: [{ type: 'text', text: 'Two files.' }] }))
    const res = await client().generate(
      request({
        systemPrompt: 'You are terse.',
        instructions: 'Answer in one line.',
        temperature: 0.2,
        topP: 0.9,
      }),
      signal(),
    )
    expect(res).toMatchObject({ text: 'Two files.', model: 'claude-fake-5-20260101', finishReason: 'stop' })

    const [seen] = server.requests
    expect(seen?.path).toBe('/v1/messages')
    expect(seen?.headers.authorization).toBe(`Bearer ${ANTHROPIC_TEST_KEY}`)
    expect(seen?.headers['anthropic-version']).toBeTruthy()
    expect(seen?.body).toEqual({
      model: 'claude-fake-5',
      max_tokens: 4096,
      system: [
        { type: 'text', text: 'You are terse.' },
        { type: 'text', text: 'Answer in one line.' },
      ],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'List the files.' }] }],
      cache_control: { type: 'ephemeral' },
    })
  })

  test('conversation: tool_use blocks, parallel tool_results merged into one user turn, tools schema', async () => {
    server.reply(anthropicMessage({ content: [{ type: 'text', text: 'Done.' }] }))
    await client({ promptCaching: false }).generate(
      request({
        systemPrompt: 'Be careful.',
        maxOutputTokens: 512,
        messages: [
          { role: 'user', content: 'Show a and b.' },
          {
            role: 'assistant',
            content: 'Reading both.',
            toolCalls: [
              { id: 'toolu_1', name: 'bash', arguments: '{"command":"cat a"}' },
              { id: 'toolu_2', name: 'bash', arguments: 'not json' },
            ],
          },
          { role: 'tool', toolCallId: 'toolu_1', name: 'bash', content: 'exit_code: 0' },
          { role: 'tool', toolCallId: 'toolu_2', name: 'bash', content: '' },
          { role: 'system', content: 'Summary of earlier turns.' },
          { role: 'user', content: 'And now c?' },
          { role: 'assistant', content: '' },
        ],
        tools: [SHELL_TOOL],
      }),
      signal(),
    )
    expect(server.requests[0]?.body).toEqual({
      model: 'claude-fake-5',
      max_tokens: 512,
      system: [
        { type: 'text', text: 'Be careful.' },
        { type: 'text', text: 'Summary of earlier turns.' },
      ],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Show a and b.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Reading both.' },
            { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'cat a' } },
            { type: 'tool_use', id: 'toolu_2', name: 'bash', input: { _raw: 'not json' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'exit_code: 0' },
            { type: 'tool_result', tool_use_id: 'toolu_2' },
            { type: 'text', text: 'And now c?' },
          ],
        },
      ],
      tools: [{ name: 'bash', description: SHELL_TOOL.description, input_schema: SHELL_TOOL.parameters }],
    })
  })

  test('forced-final turn: withheld tools are declared as stubs with tool_choice none', async () => {
    server.reply(anthropicMessage({ content: [{ type: 'text', text: 'Final answer.' }] }))
    await client().generate(
      request({
        isLastIteration: true,
        instructions: 'Give your final answer now.',
        messages: [
          { role: 'user', content: 'Go.' },
          { role: 'assistant', toolCalls: [{ id: 'toolu_9', name: 'bash', arguments: '{"command":"ls"}' }] },
          { role: 'tool', toolCallId: 'toolu_9', name: 'bash', content: 'a b' },
        ],
      }),
      signal(),
    )
    expect(server.requests[0]?.body).toMatchObject({
      system: [{ type: 'text', text: 'Give your final answer now.' }],
      tools: [{ name: 'bash', description: 'Not available on this turn.', input_schema: { type: 'object' } }],
      tool_choice: { type: 'none' },
    })
  })
})

describe('anthropic: response mapping', () => {
  test('parallel tool_use blocks become tool calls with JSON arguments; thinking is dropped', async () => {
    server.reply(
      anthropicMessage({
        content: [
          { type: 'thinking', thinking: 'Need two reads.', signature: 'sig' },
          { type: 'text', text: 'Reading both files.' },
          { type: 'tool_use', id: 'toolu_a', name: 'bash', input: { command: 'cat a' } },
          { type: 'tool_use', id: 'toolu_b', name: 'read_file', input: { path: '/etc/hosts' } },
        ],
      }),
    )
    const res = await client().generate(request({ tools: [SHELL_TOOL] }), signal())
    expect(res.finishReason).toBe('tool_calls')
    expect(res.text).toBe('Reading both files.')
    expect(res.toolCalls).toEqual([
      { id: 'toolu_a', name: 'bash', arguments: '{"command":"cat a"}' },
      { id: 'toolu_b', name: 'read_file', arguments: '{"path":"/etc/hosts"}' },
    ])
  })

  test('usage: cache read/creation are added to input (they are subsets of ours), thinking is reasoning', async () => {
    server.reply(
      anthropicMessage({
        content: [{ type: 'text', text: 'ok' }],
        usage: {
          input_tokens: 100,
          cache_read_input_tokens: 2000,
          cache_creation_input_tokens: 500,
          output_tokens: 50,
          thinking_tokens: 20,
        },
      }),
    )
    expect((await client().generate(request(), signal())).usage).toEqual({
      inputTokens: 2600,
      outputTokens: 50,
      totalTokens: 2650,
      cachedInputTokens: 2000,
      cacheWriteInputTokens: 500,
      reasoningTokens: 20,
    })
  })

  test('usage with null cache fields counts them as 0', async () => {
    server.reply(
      anthropicMessage({
        content: [{ type: 'text', text: 'ok' }],
        usage: {
          input_tokens: 7,
          output_tokens: 3,
          cache_read_input_tokens: null,
          cache_creation_input_tokens: null,
        },
      }),
    )
    expect((await client().generate(request(), signal())).usage).toMatchObject({
      inputTokens: 7,
      totalTokens: 10,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
    })
  })

  test.each([
    ['max_tokens', 'length'],
    ['model_context_window_exceeded', 'length'],
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['refusal', 'content_filter'],
  ] as const)("stop_reason '%s' -> '%s'", async (stopReason, expected) => {
    server.reply(anthropicMessage({ content: [{ type: 'text', text: 'partial' }], stopReason }))
    expect((await client().generate(request({ maxOutputTokens: 16 }), signal())).finishReason).toBe(expected)
    expect(server.requests[0]?.body).toMatchObject({ max_tokens: 16 })
  })
})
