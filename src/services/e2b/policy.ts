import { randomUUID } from 'node:crypto'
import { evaluateToolCall } from '../../interceptors/chains.js'
import type { ToolCallInterceptor } from '../../interceptors/types.js'

/** What the policy says about one E2B command: run it (perhaps rewritten), or refuse it. */
export type E2BCommandVerdict = { kind: 'run'; command: string } | { kind: 'block'; reason: string }

/**
 * The server's tool-call policy for one command of the E2B endpoint: the command goes through the
 * before-chain as a `bash` call `{ command }` (metadata `{ source: 'e2b' }`). A block refuses it; a
 * modify rewrites it. A `routeTo` does not end the evaluation here: the E2B sandbox is already the
 * place the command runs, so the routed command goes on through the interceptors after the one that
 * routed it (the host's `routeShellTools` comes first, and extensions would otherwise never see E2B
 * commands).
 */
export async function e2bCommandPolicy(
  chain: readonly ToolCallInterceptor[],
  tenant: string,
  sandboxId: string,
  command: string,
): Promise<E2BCommandVerdict> {
  let rest = chain
  let current = command
  const callId = `e2b-${randomUUID()}`
  for (;;) {
    const verdict = await evaluateToolCall(
      rest,
      {
        name: 'bash',
        arguments: JSON.stringify({ command: current }),
        callId,
        type: 'function',
        metadata: { source: 'e2b' },
      },
      { tenant, sessionId: sandboxId },
    )
    if (verdict.kind === 'block') return { kind: 'block', reason: verdict.reason }
    if (verdict.kind === 'allow')
      return { kind: 'run', command: effectiveCommand(verdict.request.arguments) ?? current }
    // An E2B command is a shell command line: a policy that routes `bash` as a code cell cannot apply.
    if (verdict.route.run?.kind === 'code')
      return {
        kind: 'block',
        reason: `the server's policy routes "bash" as a ${verdict.route.run.language} code cell (routing.code tools), which an E2B command cannot be; take "bash" out of routing.code.tools`,
      }
    current = verdict.route.command
    const at = rest.findIndex((ic) => ic.name === verdict.decidedBy)
    if (at < 0) return { kind: 'run', command: current }
    rest = rest.slice(at + 1)
  }
}

function effectiveCommand(args: string): string | undefined {
  try {
    const parsed = JSON.parse(args) as { command?: unknown }
    return typeof parsed.command === 'string' ? parsed.command : undefined
  } catch {
    return undefined
  }
}
