/**
 * Real model clients behind the one `ModelClient` interface (DESIGN §4). Each wraps its
 * provider's official SDK and maps requests, usage and finish reasons onto ours; API failures become
 * `AppError`s with stable codes.
 */
export { openAICompatible, OpenAICompatibleOptionsSchema } from './openai-compatible.js'
export type { OpenAICompatibleOptions } from './openai-compatible.js'
export { anthropic, AnthropicOptionsSchema } from './anthropic.js'
export type { AnthropicOptions } from './anthropic.js'
