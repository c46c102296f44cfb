import { z } from 'zod'

/** The SDK's own default endpoint, passed explicitly so the SDK never picks one from env or dotenv files. */
export const DEFAULT_API_URL = 'https://app.daytona.io/api'

/** Name of the environment variable the API key usually comes from (named in error messages). */
export const API_KEY_ENV = 'DAYTONA_API_KEY'

/** Options of the Daytona provider, parsed once by {@link createDaytonaProvider}. */
export const DaytonaProviderOptionsSchema = z
  .object({
    /** Daytona API key (usually from `DAYTONA_API_KEY`). Never logged or put in error messages. */
    apiKey: z.string().min(1, `the Daytona provider needs an API key; set ${API_KEY_ENV}`),
    /** Control-plane URL. @default 'https://app.daytona.io/api' */
    apiUrl: z.string().url().default(DEFAULT_API_URL),
    /** Region (`us`, `eu`…); the organisation's default when unset. */
    target: z.string().min(1).optional(),
    /** Value of the instance label (`LABELS.instance`) on created sandboxes (diagnostics). */
    instanceId: z.string().min(1).optional(),
    /**
     * Daytona stops a sandbox idle this long (minutes, 0 disables). Activity means toolbox and API
     * calls, not processes running inside. @default the profile's idleTtlMs rounded up to minutes
     */
    autoStopMinutes: z.number().int().min(0).optional(),
    /** Daytona deletes a stopped sandbox after this long (minutes; 0 = as soon as it stops). @default 0 */
    autoDeleteMinutes: z.number().int().min(0).default(0),
    /** Hard lifetime from creation, whatever the activity (minutes; unset = none). */
    ttlMinutes: z.number().int().positive().optional(),
    /** Snapshot used when a profile names neither `snapshot` nor `image`; unset = Daytona's default. */
    defaultSnapshot: z.string().min(1).optional(),
    /** How long create (and a restart in connect) may take until the sandbox runs (ms). @default 120000 */
    createTimeoutMs: z.number().int().positive().default(120_000),
    /** Deadline of each control-plane and file HTTP call (ms). @default 60000 */
    requestTimeoutMs: z.number().int().positive().default(60_000),
    /**
     * The daemon's own kill of a command comes this long after ours (ms): a backstop for a wedged
     * wrapper. The HTTP deadline of an exec is that plus 5 s. @default 15000
     */
    execGraceMs: z.number().int().positive().default(15_000),
    /** Interval of the output polls while a command with live callbacks runs (ms). @default 100 */
    pollIntervalMs: z.number().int().positive().default(100),
    /** Largest chunk one output poll fetches per stream (bytes). @default 1048576 */
    pollChunkBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /**
     * A call on a handle idle at least this long (ms) first asks Daytona for the sandbox's state
     * (one GET, before anything runs): a stopped or archived sandbox is started again (its files
     * kept, its processes gone), one still stopping is waited for and started, a deleted one is
     * `SANDBOX_LOST` so the session rebinds instead of failing the call. Auto-stop needs a whole
     * interval without toolbox activity, so a shorter idle needs no check.
     * @default the sandbox's auto-stop interval less 15 s (no check with auto-stop off, unless ttlMinutes runs out)
     */
    stateCheckIdleMs: z.number().int().min(0).optional(),
    /** Use Daytona's WebSocket state events (the SDK default); false = the SDK's polling mode. @default true */
    eventStreaming: z.boolean().default(true),
    /**
     * Host path of the static `sbx-agent` (scripts/setup.sh builds it at `.sbx/sbx-agent`). With it,
     * sandboxes get background processes: the binary is uploaded to the sandbox on a handle's first
     * process call and runs them as in Docker. Without it, processes are UNSUPPORTED.
     */
    agentBinaryPath: z.string().min(1).optional(),
  })
  .strict()

/** Options of {@link createDaytonaProvider} as callers write them. */
export type DaytonaProviderOptions = z.input<typeof DaytonaProviderOptionsSchema>

/** Parsed options. */
export type ResolvedDaytonaProviderOptions = z.output<typeof DaytonaProviderOptionsSchema>
