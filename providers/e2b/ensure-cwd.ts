import { setTimeout as sleep } from 'node:timers/promises'
import { CommandExitError, RateLimitError, type Sandbox as E2BSdkSandbox } from 'e2b'
import { AppError } from '../../src/sandbox/index.js'
import { shellQuote } from './wrapper.js'

/** How long the helper commands may take (the provider's options). */
export interface HelperTimeouts {
  helperTimeoutMs: number
  requestTimeoutMs: number
}

/**
 * A helper command that meets E2B's rate limit (a 429 from the sandbox right after its create passed
 * the same limiter) is tried again a second later, up to this many times in all, as the SDK does for
 * the create itself: a sandbox that exists is not given up for a full request bucket.
 */
const RATE_LIMITED_ATTEMPTS = 3
const RATE_LIMITED_WAIT_MS = 1_000

/**
 * Creates the profile's cwd in a new sandbox when missing: as the default user, else as root
 * chowned to it; `CONFIG_INVALID` when neither can.
 */
export async function ensureCwd(sdk: E2BSdkSandbox, cwd: string, timeouts: HelperTimeouts): Promise<void> {
  const dir = shellQuote(cwd)
  const run = async (command: string, user?: string): Promise<{ exitCode: number; stdout: string }> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await sdk.commands.run(command, {
          timeoutMs: timeouts.helperTimeoutMs,
          requestTimeoutMs: timeouts.requestTimeoutMs,
          ...(user ? { user } : {}),
        })
        return { exitCode: r.exitCode, stdout: r.stdout }
      } catch (err) {
        if (err instanceof CommandExitError) return { exitCode: err.exitCode, stdout: err.stdout }
        if (!(err instanceof RateLimitError) || attempt >= RATE_LIMITED_ATTEMPTS) throw err
        await sleep(RATE_LIMITED_WAIT_MS)
      }
    }
  }
  const first = await run(
    `[ -d ${dir} ] && exit 0; mkdir -p ${dir} 2>/dev/null && exit 0; printf '%s:%s' "$(id -u)" "$(id -g)"; exit 3`,
  )
  if (first.exitCode === 0) return
  const owner = first.stdout.trim()
  const second =
    first.exitCode === 3 && /^\d+:\d+$/.test(owner)
      ? await run(`mkdir -p ${dir} && chown ${owner} ${dir}`, 'root')
      : first
  if (second.exitCode !== 0) {
    throw new AppError(
      'CONFIG_INVALID',
      `cannot create the profile's cwd ${cwd} in the sandbox; use an existing directory`,
    )
  }
}
