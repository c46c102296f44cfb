import { ToolCallDecision, ToolResultDecision } from '../decisions.js'
import type { ToolCallInterceptor } from '../types.js'
import { redactSecrets, scanSecrets } from './secrets.js'

/** Options of {@link secretScanner}. */
export interface SecretScannerOptions {
  /** `block` replaces the whole output with a reason; `redact` masks each credential. @default 'redact' */
  action?: 'block' | 'redact'
  /** @default 'secret-scanner' */
  name?: string
}

/**
 * An afterToolCall interceptor (local and routed output alike) that finds credentials — AWS access
 * key ids, GitHub and Slack tokens, private key blocks, JWTs, `password=` / `api_key=` style
 * assignments — and blocks the output or redacts them to `[REDACTED:<kind>]`.
 *
 * @example secretScanner({ action: 'block' })
 */
export function secretScanner(options: SecretScannerOptions = {}): ToolCallInterceptor {
  const action = options.action ?? 'redact'
  return {
    name: options.name ?? 'secret-scanner',
    beforeToolCall: () => ToolCallDecision.allow(),
    afterToolCall(_request, output) {
      if (action === 'block') {
        const findings = scanSecrets(output)
        if (findings.length === 0) return ToolResultDecision.allow()
        const kinds = [...new Set(findings.map((f) => f.kind))].join(', ')
        return ToolResultDecision.block(`tool output withheld: it contained credentials (${kinds})`)
      }
      const { text, findings } = redactSecrets(output)
      return findings.length === 0 ? ToolResultDecision.allow() : ToolResultDecision.modify(text)
    },
  }
}
