import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const SCRIPT = fileURLToPath(new URL('./plain-images.sh', import.meta.url))

/** The images {@link plainImage} makes: neither carries the sandbox agent. */
export const PLAIN_IMAGES = {
  /** busybox and its applets only, no bash; odd ENTRYPOINT/CMD/WORKDIR/USER. */
  busybox: 'sandbox-router/test-busybox:plain',
  /** A Debian minbase rootfs with no uid-1000 user (no home); odd ENTRYPOINT/CMD/WORKDIR/USER. */
  debian: 'sandbox-router/test-debian:plain',
} as const

/**
 * Builds (once per machine; cached by a hash of its recipe) and names a test image without the
 * agent (test/support/plain-images.sh). The Debian one takes about a minute the first time.
 */
export function plainImage(kind: keyof typeof PLAIN_IMAGES): string {
  execFileSync('bash', [SCRIPT, kind], { stdio: ['ignore', 'inherit', 'inherit'] })
  return PLAIN_IMAGES[kind]
}
