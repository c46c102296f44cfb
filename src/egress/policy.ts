import { z } from 'zod'
import { EgressRuleError, type EgressRule, parseEgressRule, ruleMatches } from './rules.js'

const ruleList = z
  .array(z.string())
  .min(1, 'give at least one rule, or use network: none')
  .superRefine((rules, ctx) => {
    for (const [i, r] of rules.entries()) {
      try {
        parseEgressRule(r)
      } catch (err) {
        if (!(err instanceof EgressRuleError)) throw err
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: err.message, path: [i] })
      }
    }
  })

/** A credential the egress proxy adds to requests; the sandbox holds only its placeholder. */
export const BrokeredSecretSchema = z
  .object({
    /** Variable of the service's (worker's) environment holding the value. */
    env: z.string().min(1).optional(),
    /** File on the worker's machine holding the value (one trailing newline is dropped). */
    file: z.string().startsWith('/').optional(),
    /** Egress rules of the destinations that receive the value; every other one sees the placeholder. */
    destinations: ruleList,
  })
  .strict()
  .refine((s) => (s.env === undefined) !== (s.file === undefined), {
    message: 'give exactly one of env, file',
  })

/**
 * A profile's egress allowlist (`network: { allow: [...] }`): the sandbox keeps no network of its
 * own; its only way out is the service's egress proxy, which lets through these destinations (and
 * only those a tenant cap also allows).
 */
export const EgressPolicySchema = z
  .object({
    /** Rules (see {@link parseEgressRule}): `host`, `*.domain`, `host:port`, `host:*`, IPs and CIDRs. */
    allow: ruleList,
    /**
     * Brokered credentials by the variable name the sandbox sees; the value there is a placeholder
     * the proxy replaces in request headers to the secret's destinations (plain HTTP, and HTTPS with
     * `tlsIntercept`). @default {}
     */
    secrets: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'),
        BrokeredSecretSchema,
      )
      .default({}),
    /**
     * Terminate TLS to the destinations brokered secrets are bound to, so secrets reach HTTPS
     * requests too: the sandbox trusts a CA of its own (its key stays on the service's machine).
     * Other HTTPS destinations stay plain CONNECT tunnels. See docs/egress.md. @default false
     */
    tlsIntercept: z.boolean().default(false),
  })
  .strict()

/** An egress policy as written. */
export type EgressPolicyInput = z.input<typeof EgressPolicySchema>
/** An egress policy with defaults filled in. */
export type EgressPolicy = z.output<typeof EgressPolicySchema>

/** The placeholder a sandbox sees in place of the brokered secret `name`. */
export function secretPlaceholder(name: string): string {
  return `sbx-brokered-secret:${name}`
}

/** A decision on one destination, with the rule (or missing rule) that made it. */
export interface EgressVerdict {
  allowed: boolean
  /** Why, in words a user inside the sandbox can act on. */
  reason: string
}

/** Parsed rule sets of one sandbox: the profile's allowlist and the tenant's cap (if any). */
export interface CompiledEgress {
  allow: EgressRule[]
  cap?: EgressRule[]
}

/** Parses a policy's rules (and the tenant cap's) once. */
export function compileEgress(allow: readonly string[], cap?: readonly string[]): CompiledEgress {
  return { allow: allow.map(parseEgressRule), ...(cap ? { cap: cap.map(parseEgressRule) } : {}) }
}

/**
 * Decides `host:port`: allowed when a profile rule matches and, with a tenant cap, a cap rule too
 * (a profile cannot widen its tenant's cap).
 */
export function decideEgress(policy: CompiledEgress, host: string, port: number): EgressVerdict {
  const dest = `${host}:${port}`
  const rule = policy.allow.find((r) => ruleMatches(r, host, port))
  if (!rule)
    return {
      allowed: false,
      reason: `${dest} matches no rule of the profile's network.allow (${policy.allow.map((r) => r.text).join(', ')})`,
    }
  if (policy.cap && !policy.cap.some((r) => ruleMatches(r, host, port)))
    return {
      allowed: false,
      reason: `${dest} is allowed by profile rule '${rule.text}' but outside the tenant's egress cap`,
    }
  return { allowed: true, reason: `allowed by rule '${rule.text}'` }
}

/** A profile's `network` in one line for listings: `none`, `bridge` or `allow: a, b`. */
export function describeNetwork(network: 'none' | 'bridge' | EgressPolicy): string {
  return typeof network === 'string' ? network : `allow: ${network.allow.join(', ')}`
}
