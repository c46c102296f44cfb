/**
 * Short helper processes of the E2B endpoint's file calls: a shell script run in the session's
 * sandbox as a background process (with backpressure, so a long listing is not cut) and read to its
 * end. Scripts may call the sandbox's agent binary (its `--proc-fs-*` modes,
 * providers/docker/agent/fsops.c) as {@link AGENT}: the helper's supervisor is that binary.
 */
import { ConnectRpcError } from './connect.js'
import { lossOf } from './output-loss.js'
import type { E2BRouteDeps } from './deps.js'
import type { E2BSandbox } from './sandboxes.js'

/** The agent binary, in a helper script: the supervisor of every background process is the agent. */
export const AGENT = '"$(readlink /proc/$PPID/exe)"'

/** What a helper printed and how it ended. */
export interface HelperResult {
  exitCode: number | null
  stdout: string
  stderr: string
}

/** Runs `script` (`$1`, `$2` … = `args`) in the sandbox to its end; returns its exit code and output. */
export async function runHelper(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  script: string,
  args: string[],
): Promise<HelperResult> {
  const svc = deps.processes
  if (!svc) throw new ConnectRpcError('unimplemented', 'this server has no sandbox processes')
  const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  const info = await svc.start(s.tenant, s.sandboxId, {
    command: `set -- ${quoted}; ${script}`,
    backpressure: true,
  })
  if (!info) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
  let stdout = ''
  let stderr = ''
  let from = { stdoutOffset: 0, stderrOffset: 0 }
  try {
    await svc.writeStdin(s.tenant, s.sandboxId, info.id, new Uint8Array(), true).catch(() => undefined)
    for (;;) {
      const out = await svc.read(s.tenant, s.sandboxId, info.id, {
        ...from,
        maxBytes: 1 << 20,
        waitMs: 5_000,
      })
      if (!out) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
      const loss = lossOf(out, info.pid)
      if (loss) throw loss
      stdout += out.stdout.data
      stderr += out.stderr.data
      from = { stdoutOffset: out.stdout.nextOffset, stderrOffset: out.stderr.nextOffset }
      const p = out.process
      if (p.state !== 'running' && from.stdoutOffset >= p.stdoutBytes && from.stderrOffset >= p.stderrBytes)
        return { exitCode: p.exitCode, stdout, stderr }
    }
  } finally {
    await svc.remove(s.tenant, s.sandboxId, info.id).catch(() => undefined)
  }
}

/** An agent mode's failure line: `{"error":"<CODE>","message":"…"}`. */
export interface AgentFailure {
  error: string
  message: string
}

/** The failure a line of agent output reports, if it is one. */
export function agentFailure(line: string): AgentFailure | undefined {
  if (!line.startsWith('{"error"')) return undefined
  try {
    const j = JSON.parse(line) as Partial<AgentFailure>
    return typeof j.error === 'string' ? { error: j.error, message: String(j.message ?? j.error) } : undefined
  } catch {
    return undefined
  }
}

/** Whether the agent refused a mode it does not have (it predates the mode). */
export function agentLacksMode(f: AgentFailure): boolean {
  return f.error === 'BAD_REQUEST' && /unknown or malformed --proc-fs-/.test(f.message)
}

/** The error for a sandbox whose agent predates `what`. */
export function agentTooOld(what: string): ConnectRpcError {
  return new ConnectRpcError(
    'unimplemented',
    `${what} needs a newer agent than this sandbox has (it was created before the service was upgraded, ` +
      'and keeps the agent it started with); create a new sandbox',
  )
}
