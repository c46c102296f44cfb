import type { ModelClient } from '../../agent/model-client.js'
import { anthropic } from '../../agent/models/anthropic.js'
import { openAICompatible } from '../../agent/models/openai-compatible.js'
import type { Config } from '../../config/schema.js'
import { AppError } from '../../errors.js'

/** Builds the model client a run asks for from config `models` (keys from the named env variables). */
export function modelFor(
  config: Config,
  name: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): ModelClient {
  const names = Object.keys(config.models)
  const chosen = name ?? (config.models['default'] ? 'default' : names.length === 1 ? names[0] : undefined)
  if (!chosen) {
    throw new AppError(
      'BAD_REQUEST',
      names.length === 0
        ? 'no model configured: add a `models` entry (kind openai-compatible or anthropic) to the config'
        : `several models are configured; name one in "model": ${names.join(', ')}`,
    )
  }
  const m = config.models[chosen]
  if (!m)
    throw new AppError(
      'BAD_REQUEST',
      `unknown model "${chosen}"; configured: ${names.join(', ') || '(none)'}`,
    )
  const apiKey = env[m.apiKeyEnv]
  if (!apiKey)
    throw new AppError('CONFIG_INVALID', `model "${chosen}": environment variable ${m.apiKeyEnv} is not set`)
  const base = { apiKey, model: m.model, ...(m.baseURL ? { baseURL: m.baseURL } : {}) }
  return m.kind === 'anthropic' ? anthropic(base) : openAICompatible(base)
}
