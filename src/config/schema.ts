import { z } from 'zod'
import { ProfileSchema } from '../sandbox/profiles.js'
import { CircuitOptionsSchema } from '../routing/circuit-breaker.js'
import { RoutePolicySchema } from '../routing/policies.js'
import { EgressPolicySchema } from '../egress/policy.js'

/** One API key and the tenant it maps to. Keys are hashed at load; the plain key is not kept. */
export const ApiKeySchema = z
  .object({
    /** The bearer key (plain text in the file; prefer `keyEnv`). */
    key: z.string().min(16, 'API keys must be at least 16 characters').optional(),
    /** Name of an environment variable holding the key. */
    keyEnv: z.string().min(1).optional(),
    /** sha256 hex of the key, for files that must not hold the key itself. */
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'a 64-character lowercase hex sha256')
      .optional(),
    tenant: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_" and "-" (1–64)'),
    /** Admin scope: the queue dashboard and cross-tenant reads of metrics. @default false */
    admin: z.boolean().default(false),
  })
  .strict()
  .refine((k) => [k.key, k.keyEnv, k.sha256].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of key, keyEnv, sha256',
  })

/** Per-tenant quotas. */
export const QuotaSchema = z
  .object({
    /**
     * Sandboxes a tenant may hold at once (bound sessions, ephemeral calls, creates in flight),
     * counted across the whole fleet; a new one past it is refused at once with QUOTA_EXCEEDED.
     * @default 16
     */
    maxSandboxes: z.number().int().positive().default(16),
    /** Jobs a tenant may have queued or running at once. @default 64 */
    maxConcurrentJobs: z.number().int().positive().default(64),
    /** Requests per second (token bucket, burst = 2×). @default 50 */
    requestsPerSecond: z.number().positive().default(50),
    /** Background processes one session may have running at once; one more is refused (429). @default 16 */
    maxProcessesPerSession: z.number().int().positive().default(16),
    /**
     * Bytes of stdout and of stderr kept per background process: past it the oldest are dropped, except
     * for E2B commands, whose writer waits for their stream instead (docs/e2b-endpoint.md). @default 1048576
     */
    processOutputBytes: z.number().int().min(1024).max(268_435_456).default(1_048_576),
    /** Snapshots a tenant may hold at once (`POST /v1/sessions/{id}/snapshots`, kept forks). @default 32 */
    maxSnapshots: z.number().int().positive().default(32),
  })
  .strict()

/** Model clients agent runs may use, by name. */
export const ModelConfigSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('openai-compatible'),
      model: z.string().min(1),
      baseURL: z.string().url().optional(),
      apiKeyEnv: z.string().default('OPENAI_API_KEY'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('anthropic'),
      model: z.string().min(1),
      baseURL: z.string().url().optional(),
      apiKeyEnv: z.string().default('ANTHROPIC_API_KEY'),
    })
    .strict(),
])

/** The whole service configuration (`sandbox-router.config.json` / `.yaml`). */
export const ConfigSchema = z
  .object({
    server: z
      .object({
        /** @default 8080 */
        port: z.number().int().min(0).max(65_535).default(8080),
        /** @default '127.0.0.1' */
        host: z.string().default('127.0.0.1'),
        /** Max request body (bytes). @default 1048576 */
        bodyLimitBytes: z.number().int().positive().default(1_048_576),
        /** Max file upload (bytes). @default 10485760 */
        fileLimitBytes: z.number().int().positive().default(10_485_760),
        /**
         * Time a client has to send one whole request, headers and body (ms); a slower one gets 408
         * and its connection is closed. Waiting for the answer (`wait=true`, SSE) is not bounded by
         * it. Raise it for large file uploads over slow links. @default 30000
         */
        requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
        /**
         * Host names (no port) `/mcp` answers to; any other `Host` header is a 403 (DNS-rebinding
         * protection). `'*'` accepts any. @default the listen address and localhost, 127.0.0.1, ::1
         * (on 0.0.0.0 / ::, also the machine's host name and interface addresses)
         */
        allowedHosts: z.array(z.string().min(1)).min(1).optional(),
        /**
         * Browser origins (`https://app.example.com`) allowed to call `/mcp`; a request with another
         * `Origin` is a 403. `'*'` accepts any. @default http(s) origins on an allowed host
         */
        allowedOrigins: z.array(z.string().min(1)).min(1).optional(),
        /**
         * An MCP session with no request for this long (and no tool call running) expires: its sandbox
         * session and files are deleted and its quota freed (ms). @default 600000
         */
        mcpSessionIdleMs: z.number().int().min(100).default(600_000),
        /**
         * An SSE stream with nothing to send for this long gets a comment line (`: keepalive`), so a
         * proxy or load balancer between the client and the service does not close a quiet stream
         * (a command that prints nothing for minutes, an event stream with no events) (ms).
         * @default 15000
         */
        sseKeepAliveMs: z.number().int().min(100).max(3_600_000).default(15_000),
        /**
         * Serve HTTPS instead of HTTP: PEM files of the certificate (chain) and its private key,
         * resolved against the config file's folder. E2B apps fetch `getHost(port)` URLs over
         * https (docs/e2b-endpoint.md). @default unset: plain HTTP
         */
        tls: z
          .object({
            /** PEM certificate (leaf first, then intermediates). */
            certFile: z.string().min(1),
            /** PEM private key of the certificate. */
            keyFile: z.string().min(1),
          })
          .strict()
          .optional(),
      })
      .strict()
      .default({
        port: 8080,
        host: '127.0.0.1',
        bodyLimitBytes: 1_048_576,
        fileLimitBytes: 10_485_760,
        requestTimeoutMs: 30_000,
        mcpSessionIdleMs: 600_000,
        sseKeepAliveMs: 15_000,
      }),
    queue: z
      .object({
        /**
         * `memory`: the embedded in-process queue; `bullmq` or `redis`: the fleet on Redis (`redis` is
         * the job lifecycle of our own, fewer Redis commands per job; see docs/redis-path.md).
         * @default 'memory'
         */
        driver: z.enum(['memory', 'bullmq', 'redis']).default('memory'),
        /** @default 'redis://127.0.0.1:6379' (env REDIS_URL) */
        redisUrl: z.string().default('redis://127.0.0.1:6379'),
        /** Prefix of every Redis key. @default 'sbx' */
        prefix: z
          .string()
          .regex(/^[A-Za-z0-9_-]+$/)
          .default('sbx'),
        /** Exec jobs run at once per worker. @default 16 */
        concurrency: z.number().int().positive().default(16),
        /**
         * A fleet over many Docker engines (a Redis driver only): one queue lane per engine, sessions placed on
         * the healthiest engine with room, jobs only to workers beside their session's engine (see
         * docs/deploy.md). @default false (every worker reaches the same engine)
         */
        engineRouting: z.boolean().optional(),
      })
      .strict()
      .default({ driver: 'memory', redisUrl: 'redis://127.0.0.1:6379', prefix: 'sbx', concurrency: 16 }),
    /**
     * A fleet over many Docker engines (`queue.engineRouting`, docs/deploy.md): the internal gateway
     * through which an API process reaches the sessions of engines it does not reach itself.
     */
    fleet: z
      .object({
        /**
         * The secret API processes and workers share to authorise gateway calls (never a tenant's
         * key; at least 32 characters, e.g. `openssl rand -hex 32`); env SBX_FLEET_SECRET. Unset:
         * workers serve no gateway, and the API answers 503 for the files, processes and code of
         * sessions on engines it does not reach. @default unset
         */
        secret: z
          .string()
          .min(32, 'fleet.secret must be at least 32 characters: generate one with `openssl rand -hex 32`')
          .optional(),
        /** The gateway each `sbx worker` serves (only with `fleet.secret`). */
        gateway: z
          .object({
            /** TCP port; 0 picks a free one. @default 0 */
            port: z.number().int().min(0).max(65_535).default(0),
            /** Address to listen on: the host's private address for API processes on other hosts. @default '127.0.0.1' */
            host: z.string().default('127.0.0.1'),
            /**
             * The URL API processes reach the gateway at (`http://10.0.0.7:7070`); env
             * SBX_GATEWAY_URL. @default `http://<host>:<port>`
             */
            advertiseUrl: z.string().url().optional(),
          })
          .strict()
          .default({ port: 0, host: '127.0.0.1' }),
      })
      .strict()
      .default({ gateway: { port: 0, host: '127.0.0.1' } }),
    providers: z
      .object({
        docker: z
          .object({
            enabled: z.boolean().default(true),
            /** Engine socket or URL; env DOCKER_HOST. */
            host: z.string().optional(),
            /**
             * Sandboxes this engine holds at once, every profile and tenant together, counted across
             * the fleet; a new one past it is refused at once with QUOTA_EXCEEDED. @default unbounded
             */
            maxSandboxes: z.number().int().positive().optional(),
            /**
             * The name this worker gives the engine it reaches, with `queue.engineRouting`; workers
             * beside one engine must agree. @default the engine's own ID (`docker info`)
             */
            engineId: z
              .string()
              .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/, 'letters, digits, _ . : - (up to 128)')
              .optional(),
            /**
             * Memory this engine's sandboxes may reserve together (their limits summed), with
             * `queue.engineRouting`: a new session goes to an engine only while its limit fits. Unset,
             * placement still weighs each engine's reserved memory against the engine's own memory
             * (`docker info`), but refuses nothing for it (limits are usually far above use).
             * @default unset
             */
            memoryCapacityMb: z.number().int().positive().optional(),
            /** A sandbox nothing used for its profile's idleTtlMs plus this ends itself (ms). @default 60000 */
            idleExitSlackMs: z.number().int().min(1_000).optional(),
            /**
             * The static sbx-agent on this machine that the provider brings into every sandbox (so a
             * profile's image may be any image); `false`: use the image's own
             * /usr/local/bin/sbx-agent (images built FROM sandbox-router/base).
             * @default env SBX_AGENT_BIN, else .sbx/sbx-agent (scripts/setup.sh compiles it) when it exists
             */
            agentBinary: z.union([z.string().min(1), z.literal(false)]).optional(),
            /**
             * Host folder of the direct agent channel: commands and output travel on a Unix socket
             * there instead of through the engine (only where the engine is on this machine);
             * `false` keeps every channel on `docker exec`. @default `<tmpdir>/sbx-agent-<uid>`
             */
            agentSocketDir: z.union([z.string().startsWith('/'), z.literal(false)]).optional(),
          })
          .strict()
          .default({ enabled: true }),
        daytona: z
          .object({
            /** @default true when the API key variable is set, else false */
            enabled: z.boolean().optional(),
            /** Control plane; env DAYTONA_API_URL. @default 'https://app.daytona.io/api' */
            apiUrl: z.string().url().optional(),
            /** Variable holding the API key (the key itself never goes in a config file). */
            apiKeyEnv: z.string().min(1).default('DAYTONA_API_KEY'),
            /** Region (`us`, `eu`); env DAYTONA_TARGET. @default the organisation's default */
            target: z.string().min(1).optional(),
            /** Stop a sandbox idle this many minutes (0 disables). @default the profile's idleTtlMs */
            autoStopMinutes: z.number().int().min(0).optional(),
            /** Snapshot for profiles that name neither `snapshot` nor `image`. @default Daytona's default */
            defaultSnapshot: z.string().min(1).optional(),
            /** Delete a stopped sandbox after this many minutes (0 = when it stops). @default 0 */
            autoDeleteMinutes: z.number().int().min(0).optional(),
            /** Hard lifetime from creation (minutes), whatever the activity. @default none */
            ttlMinutes: z.number().int().positive().optional(),
            /**
             * A session's call on a sandbox idle at least this long (ms) first asks Daytona for its
             * state (one GET): a stopped or archived sandbox is started again (files kept, processes
             * gone), a deleted one is replaced. 0 checks before every call.
             * @default the sandbox's auto-stop interval less 15 s (none with auto-stop off, unless ttlMinutes runs out)
             */
            stateCheckIdleMs: z.number().int().min(0).optional(),
            /**
             * Host path of the static agent binary uploaded into sandboxes for background processes.
             * @default the checkout's `.sbx/sbx-agent` (built by scripts/setup.sh) when it exists
             */
            agentBinaryPath: z.string().min(1).optional(),
          })
          .strict()
          .optional(),
        e2b: z
          .object({
            /** @default true when the API key variable is set, else false */
            enabled: z.boolean().optional(),
            /** Control plane; env E2B_API_URL. @default `https://api.<domain>` */
            apiUrl: z.string().url().optional(),
            /** One envd URL for every sandbox (proxies, self-hosted); env E2B_SANDBOX_URL. */
            sandboxUrl: z.string().url().optional(),
            /**
             * Where port traffic connects instead of each sandbox's preview host
             * `https://<port>-<sandboxId>.<domain>` (sent as `Host` only): one origin in front of E2B's
             * proxy, local fakes; env SBX_E2B_PREVIEW_URL. @default the preview host itself
             */
            previewUrl: z.string().url().optional(),
            /** E2B domain (self-hosted or compatible clouds); env E2B_DOMAIN. @default 'e2b.app' */
            domain: z.string().min(1).optional(),
            /** Variable holding the API key (the key itself never goes in a config file). */
            apiKeyEnv: z.string().min(1).default('E2B_API_KEY'),
            /**
             * Host path of the static agent binary uploaded into sandboxes for background processes.
             * @default the checkout's `.sbx/sbx-agent` (built by scripts/setup.sh) when it exists
             */
            agentBinaryPath: z.string().min(1).optional(),
          })
          .strict()
          .optional(),
      })
      .strict()
      .default({ docker: { enabled: true } }),
    /** Named sandbox profiles. `default` (docker, hardened) and `dev` (docker, the dev image) exist unless overridden. */
    profiles: z.record(z.string().regex(/^[A-Za-z0-9._-]+$/), ProfileSchema).default({}),
    /** The server's own routing policy for tool calls (HTTP /v1/tool-calls, MCP, agent runs). */
    routing: z
      .object({
        /** Route shell-style tools here. @default { providerId: 'docker', profile: 'default' } */
        shell: z
          .object({ providerId: z.string().default('docker'), profile: z.string().default('default') })
          .strict()
          .default({ providerId: 'docker', profile: 'default' }),
        /**
         * Route code tools (`python`, `run_code`, …) as cells of the session's stateful kernel
         * (`routeCodeTools`). The profile's image needs `python3` / `node`, like the built-in `dev`.
         * Absent: code tools are not routed. @default absent
         */
        code: z
          .object({
            providerId: z.string().min(1).default('docker'),
            profile: z.string().min(1).default('dev'),
            /** Tool names to route. @default ['python', 'run_code', 'execute_python', 'run_python', 'code_interpreter', 'execute_code'] */
            tools: z
              .array(z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/))
              .min(1)
              .optional(),
            /** The kernel of calls that name no language. @default 'python' */
            language: z.enum(['python', 'javascript']).default('python'),
          })
          .strict()
          .optional(),
        /** Redact or block credentials in routed output. @default 'redact' */
        secretScanner: z.enum(['off', 'redact', 'block']).default('redact'),
        /**
         * Named routing policies: `routeTo('<policy>', 'auto', command)` (or `provider: <policy>` over
         * HTTP) picks among the policy's candidates (see src/routing/policies.ts). @default {}
         */
        policies: z.record(z.string().regex(/^[A-Za-z0-9._-]{1,64}$/), RoutePolicySchema).default({}),
        /** When a provider's circuit opens, and for how long (policies skip open providers). */
        circuit: CircuitOptionsSchema.default({ failureThreshold: 5, cooldownMs: 30_000 }),
        /**
         * Per tenant, the providers and policies its calls may name (`allow`); a tenant not listed may
         * use every one. @default {}
         */
        tenants: z
          .record(z.string(), z.object({ allow: z.array(z.string().min(1)).min(1) }).strict())
          .default({}),
      })
      .strict()
      .default({
        shell: { providerId: 'docker', profile: 'default' },
        secretScanner: 'redact',
        policies: {},
        circuit: { failureThreshold: 5, cooldownMs: 30_000 },
        tenants: {},
      }),
    /** The egress proxy of profiles with `network: { allow }` (docs/egress.md). */
    egress: z
      .object({
        /** Host folder for the per-sandbox proxy sockets. @default `<tmpdir>/sbx-egress-<uid>` */
        socketDir: z.string().startsWith('/').optional(),
        /** PEM file of a CA trusted for HTTPS servers behind `tlsIntercept`, besides Node's roots. */
        upstreamCaFile: z.string().startsWith('/').optional(),
        /** Per tenant, a cap on egress: a destination must match the profile's rules and these. @default {} */
        tenants: z
          .record(z.string(), z.object({ allow: EgressPolicySchema.shape.allow }).strict())
          .default({}),
      })
      .strict()
      .default({ tenants: {} }),
    /**
     * The E2B-compatible endpoint (docs/e2b-endpoint.md): which of our profiles each E2B `template`
     * names. A template not listed is a 404 naming the known ones. @default { base: 'e2b' } (the
     * built-in `e2b` profile: the default image, home and working directory `/home/user`)
     */
    e2b: z
      .object({
        templates: z
          .record(z.string().regex(/^[A-Za-z0-9._:/-]{1,128}$/), z.string().regex(/^[A-Za-z0-9._-]+$/))
          .default({ base: 'e2b' }),
        /**
         * The sandbox domain create and connect report, so the SDK's `getHost(port)` gives
         * `<port>-<sandboxId>.<domain>`: a request to this server with that `Host` goes to the port
         * in the sandbox. Needs names under it to resolve to this server (wildcard DNS, or
         * `*.localhost` where the resolver maps it to loopback). A `:port` may follow the name.
         * @default `localhost:<the port the request came to>`
         */
        domain: z
          .string()
          .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, 'a host name, optionally with :port (e2b.example.com:8443)')
          .optional(),
      })
      .strict()
      .default({ templates: { base: 'e2b' } }),
    /** Extension module specifiers to load and enable (resolved against the config file's folder). */
    extensions: z.array(z.string().min(1)).default([]),
    /** API keys → tenants. Empty in embedded mode means one built-in key from env SBX_API_KEY. */
    apiKeys: z.array(ApiKeySchema).default([]),
    quotas: QuotaSchema.default({
      maxSandboxes: 16,
      maxConcurrentJobs: 64,
      requestsPerSecond: 50,
      maxProcessesPerSession: 16,
      processOutputBytes: 1_048_576,
      maxSnapshots: 32,
    }),
    models: z.record(z.string(), ModelConfigSchema).default({}),
  })
  .strict()

/** Configuration as written. */
export type ConfigInput = z.input<typeof ConfigSchema>
/** Configuration with every default filled in. */
export type Config = z.output<typeof ConfigSchema>

/** Whether `config` runs a fleet: its queue is on Redis (`bullmq` or `redis`), not in-process. */
export function isFleet(config: Pick<Config, 'queue'>): boolean {
  return config.queue.driver !== 'memory'
}
