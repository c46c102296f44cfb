import { Daytona } from '@daytonaio/sdk'
import { randomUUID } from 'node:crypto'
import {
  defineProvider,
  LABELS,
  OWNER,
  PROVIDER_LABELS,
  type SandboxHealth,
  type SandboxProvider,
} from '../../src/sandbox/index.js'
import { daytonaBackend } from './backend.js'
import { type ErrorScope, mapDaytonaError, redactUrl } from './errors.js'
import { type DaytonaProviderOptions, DaytonaProviderOptionsSchema } from './options.js'
import { daytonaReviver } from './revive.js'
import type { DaytonaSandbox, HandleContext } from './sandbox.js'

/** Provider id of the Daytona provider. */
export const DAYTONA_PROVIDER_ID = 'daytona'

/** The Daytona provider: the SPI plus the SDK client it uses (for diagnostics and tests). */
export interface DaytonaProvider extends SandboxProvider {
  readonly daytona: Daytona
  health(): Promise<SandboxHealth>
  /** Releases the SDK client (its event socket); sandboxes stay. */
  close(): Promise<void>
}

/**
 * Creates the Daytona provider (id `daytona`) on the official `@daytonaio/sdk` client. Commands run
 * under an in-sandbox wrapper that separates stdout and stderr, enforces our timeout on the whole
 * process group (keeping partial output) and caps each stream; every sandbox carries the create
 * labels and a server-side lifetime (auto-stop, then auto-delete). SDK errors are mapped to
 * `AppError`s by class: 429 → retryable, 404 → `SANDBOX_LOST`, 401/403 → `CONFIG_INVALID` (a
 * file the sandbox user may not access → `BAD_REQUEST`). A stopped sandbox is started again by
 * `connect` and by a handle's `ready()` after an idle long enough for Daytona's auto-stop.
 */
export function createDaytonaProvider(options: DaytonaProviderOptions): DaytonaProvider {
  const opts = DaytonaProviderOptionsSchema.parse(options)
  const scope: ErrorScope = { apiUrl: redactUrl(opts.apiUrl), apiKey: opts.apiKey }
  const daytona = new Daytona({
    apiKey: opts.apiKey,
    apiUrl: opts.apiUrl,
    ...(opts.target ? { target: opts.target } : {}),
    requestTimeoutMs: opts.requestTimeoutMs,
    useDeprecatedPolling: !opts.eventStreaming,
  })
  const handles = new Set<DaytonaSandbox>()
  const reviver = daytonaReviver(daytona, scope, opts)
  const context: HandleContext = { scope, options: opts, ...reviver }
  const backend = daytonaBackend({ daytona, context, reviver, handles })

  async function health(): Promise<SandboxHealth> {
    try {
      // A filter nothing matches: one authenticated round trip, no sandboxes materialised.
      await daytona
        .list({ labels: { [LABELS.owner]: OWNER, [PROVIDER_LABELS.probe]: randomUUID() }, limit: 1 })
        .next()
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: mapDaytonaError(err, scope, 'probing the Daytona API').message }
    }
  }

  async function close(): Promise<void> {
    await Promise.all([...handles].map((h) => h.close()))
    await daytona[Symbol.asyncDispose]()
  }

  return {
    ...defineProvider({ id: DAYTONA_PROVIDER_ID, instanceId: opts.instanceId, backend }),
    daytona,
    health,
    close,
  }
}
