import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../app.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema } from '../schemas.js'

const ProvidersSchema = z
  .object({
    providers: z.array(
      z.object({
        id: z.string(),
        health: z.object({ ok: z.boolean(), reason: z.string().optional() }),
        circuit: z
          .object({
            state: z.enum(['closed', 'open', 'half-open']),
            failures: z.number(),
            openUntil: z.number().optional(),
            lastError: z.string().optional(),
          })
          .optional(),
        /** What the provider enforces of a profile's egress policy (docs/egress.md). */
        egress: z
          .object({
            allowlist: z.boolean(),
            /** The provider's own mechanism the policy compiles to. */
            mechanism: z.string().optional(),
            /** Parts of the policy language it enforces (`block-all`, `cidrs`, `hosts`, …). */
            enforces: z.array(z.string()).optional(),
            /** Parts it cannot enforce: a profile using one is refused at start-up. */
            refuses: z.array(z.string()).optional(),
            reason: z.string().optional(),
          })
          .optional(),
        profiles: z.array(
          z.object({
            name: z.string(),
            cpu: z.number(),
            memoryMb: z.number(),
            network: z.string(),
            /** Kernel boundary: `runc` or `runsc` (gVisor). */
            runtime: z.string(),
            defaultTimeoutMs: z.number(),
            maxTimeoutMs: z.number(),
          }),
        ),
        /** Runtimes the provider's engine offers (Docker: `docker info` runtimes); absent when it cannot say. */
        runtimes: z.array(z.string()).optional(),
        /** Docker with `queue.engineRouting`: each engine of the fleet, its state and load. */
        engines: z
          .array(
            z.object({
              id: z.string(),
              state: z.enum(['live', 'down']),
              draining: z.boolean(),
              running: z.number(),
              cap: z.number().optional(),
              /** Memory the engine's sandboxes may reserve (bytes): the configured capacity, or the engine's own memory. */
              memoryBytes: z.number().optional(),
              /** `memoryBytes` is a configured bound (`providers.docker.memoryCapacityMb`), not only a weight. */
              memoryStrict: z.boolean().optional(),
              /** The memory limits of this scope's sandboxes on the engine, summed (bytes). */
              reservedBytes: z.number().optional(),
              seenAt: z.number(),
              reason: z.string().optional(),
              /** Live worker gateways of the engine (`fleet.gateway`): those that renewed their entry within `engineStaleMs`. */
              gateways: z.number().optional(),
              /** Their URLs; an admin key's view only. */
              gatewayUrls: z.array(z.string()).optional(),
            }),
          )
          .optional(),
        /** Which of persistent workspaces, snapshots and forks the provider supports (docs/workspaces.md). */
        workspaces: z
          .object({ persistent: z.boolean(), snapshots: z.boolean(), fork: z.boolean() })
          .optional(),
      }),
    ),
    /** Routing policies (config `routing.policies`): a name `routeTo` / `provider` may give instead of a provider. */
    policies: z.array(
      z.object({
        name: z.string(),
        mode: z.string(),
        candidates: z.array(
          z.object({
            provider: z.string(),
            profile: z.string(),
            weight: z.number(),
            pricePerSecond: z.number().optional(),
          }),
        ),
      }),
    ),
  })
  .openapi('Providers')

/** How long `/readyz` waits for its checks before it answers 503 (a probe must not hang). */
const READINESS_DEADLINE_MS = 5_000

/** The checks, or one failing `readiness` check when they do not all answer within the deadline. */
async function withinReadinessDeadline(
  checks: Promise<Record<string, { ok: boolean; reason?: string }>>,
): Promise<Record<string, { ok: boolean; reason?: string }>> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<Record<string, { ok: boolean; reason?: string }>>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({
          readiness: { ok: false, reason: `the checks did not answer within ${READINESS_DEADLINE_MS} ms` },
        }),
      READINESS_DEADLINE_MS,
    )
  })
  try {
    return await Promise.race([
      checks.catch((err: unknown) => ({
        readiness: { ok: false, reason: err instanceof Error ? err.message : String(err) },
      })),
      late,
    ])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * `/healthz`, `/readyz` (no auth), `/metrics` (a key: an admin key reads every series, any other key
 * only its own tenant's) and `GET /v1/providers`.
 */
export function registerSystemRoutes(app: App, deps: AppDeps): void {
  app.get('/healthz', (c) => c.json({ ok: true }))
  app.get('/readyz', async (c) => {
    const checks = await withinReadinessDeadline(deps.readiness())
    const ok = Object.values(checks).every((x) => x.ok)
    if (ok) return c.json({ ok, checks }, 200)
    const failing = Object.entries(checks)
      .filter(([, v]) => !v.ok)
      .map(([k, v]) => `${k}: ${v.reason ?? 'down'}`)
      .join('; ')
    return c.json({ ok, checks, error: { code: 'UNAVAILABLE', message: `not ready: ${failing}` } }, 503)
  })
  app.get('/metrics', async (c) => {
    // Cross-tenant metric reads are admin scope (config `apiKeys[].admin`).
    const { admin, tenant } = c.get('principal')
    const text = await deps.metrics(admin ? undefined : { tenant })
    return c.text(text, 200, { 'content-type': 'text/plain; version=0.0.4' })
  })

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/providers',
      summary: 'Providers, their profiles, health and circuits; routing policies',
      security: [{ bearer: [] }],
      responses: {
        200: { content: { 'application/json': { schema: ProvidersSchema } }, description: 'the registry' },
        401: { content: { 'application/json': { schema: ErrorSchema } }, description: 'no or unknown key' },
      },
    }),
    async (c) => {
      // Fleet internals (the workers' gateway URLs) are admin scope (config `apiKeys[].admin`).
      const { admin } = c.get('principal')
      return c.json({ providers: await deps.providers({ admin }), policies: deps.policies?.() ?? [] }, 200)
    },
  )
}
