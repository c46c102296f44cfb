import type { z } from 'zod'
import { AppError } from '../../errors.js'
import type { ModelRequest } from '../model-client.js'

/**
 * Parses a client's options once, at construction. Invalid options fail fast with `CONFIG_INVALID`
 * naming the offending fields (values are never echoed, so the API key cannot leak).
 */
export function parseClientOptions<S extends z.ZodType>(
  schema: S,
  options: unknown,
  factory: string,
): z.output<S> {
  const parsed = schema.safeParse(options)
  if (parsed.success) return parsed.data
  const issues = parsed.error.issues
    .map((issue) => `'${issue.path.join('.') || '(options)'}': ${issue.message}`)
    .join('; ')
  throw new AppError('CONFIG_INVALID', `${factory}() options are invalid: ${issues}; fix these fields.`, {
    cause: parsed.error,
  })
}

/** `systemPrompt` then `instructions`, separated by a blank line; undefined when both are empty. */
export function systemText(request: Pick<ModelRequest, 'systemPrompt' | 'instructions'>): string | undefined {
  const parts = [request.systemPrompt, request.instructions].filter((part): part is string => !!part)
  return parts.length > 0 ? parts.join('\n\n') : undefined
}
