import { AppError } from '../../errors.js'
import type { Sandbox, SandboxCode } from '../types.js'
import { runKernelCode } from './kernel-runner.js'
import { CODE_LANGUAGES, type CodeLanguage } from './types.js'

const BINARIES: Record<CodeLanguage, string> = { python: 'python3', javascript: 'node' }

/** Which of the languages' interpreters the sandbox's image has (`command -v`). */
export async function probeLanguages(sandbox: Sandbox, signal?: AbortSignal): Promise<CodeLanguage[]> {
  const probe = CODE_LANGUAGES.map((l) => `command -v ${BINARIES[l]} >/dev/null 2>&1 && echo ${l}`).join('; ')
  const r = await sandbox.exec(
    { command: `${probe}; true`, timeoutMs: 15_000, outputCapBytes: 4096 },
    signal ? { signal } : {},
  )
  const found = new Set(r.stdout.split('\n').map((s) => s.trim()))
  return CODE_LANGUAGES.filter((l) => found.has(l))
}

/** The service's kernel over a sandbox's background processes (the Docker provider's interpreter). */
export function kernelCode(sandbox: Sandbox): SandboxCode {
  return {
    languages: (opts) => probeLanguages(sandbox, opts?.signal),
    run: (request, opts) => runKernelCode(sandbox, request, opts),
  }
}

/**
 * A sandbox's code interpreter: the provider's own where it has one, else the service's kernel as a
 * background process; `undefined` when the sandbox has neither.
 */
export function codeOf(sandbox: Sandbox): SandboxCode | undefined {
  if (sandbox.code) return sandbox.code
  if (sandbox.processes) return kernelCode(sandbox)
  return undefined
}

/** {@link codeOf}, or `UNSUPPORTED` saying what would have it. */
export function requireCode(sandbox: Sandbox): SandboxCode {
  const code = codeOf(sandbox)
  if (!code)
    throw new AppError(
      'UNSUPPORTED',
      `provider '${sandbox.ref.providerId}' has no code interpreter here (it needs background processes: ` +
        'on Daytona and E2B set agentBinaryPath, or use the docker provider)',
    )
  return code
}
