import { ModelRequestDecision } from '../decisions.js'
import type { ModelRequestInterceptor } from '../types.js'

/** Options of {@link tenantScope}. */
export interface TenantScopeOptions {
  /** Replaces the system prompt of every request. */
  systemPrompt?: string
  /** Temperatures above this (or unset) are lowered to it. */
  maxTemperature?: number
  /** Output-token limits above this (or unset) are lowered to it. */
  maxOutputTokens?: number
  /** @default 'tenant-scope' */
  name?: string
}

/**
 * A model-request interceptor for multi-tenant policy: sets the tenant's system prompt and caps
 * temperature and output tokens.
 *
 * @example tenantScope({ systemPrompt: "You are acme's assistant.", maxTemperature: 0.7, maxOutputTokens: 2048 })
 */
export function tenantScope(options: TenantScopeOptions): ModelRequestInterceptor {
  const { systemPrompt, maxTemperature, maxOutputTokens } = options
  if (systemPrompt === undefined && maxTemperature === undefined && maxOutputTokens === undefined) {
    throw new TypeError('tenantScope needs at least one of systemPrompt, maxTemperature, maxOutputTokens')
  }
  return {
    name: options.name ?? 'tenant-scope',
    intercept(request) {
      let d = ModelRequestDecision.allow()
      if (systemPrompt !== undefined && request.systemPrompt !== systemPrompt) {
        d = d.merge(ModelRequestDecision.withSystemPrompt(systemPrompt))
      }
      if (
        maxTemperature !== undefined &&
        (request.temperature === undefined || request.temperature > maxTemperature)
      ) {
        d = d.merge(ModelRequestDecision.withTemperature(maxTemperature))
      }
      if (
        maxOutputTokens !== undefined &&
        (request.maxOutputTokens === undefined || request.maxOutputTokens > maxOutputTokens)
      ) {
        d = d.merge(ModelRequestDecision.withMaxOutputTokens(maxOutputTokens))
      }
      return d
    },
  }
}
