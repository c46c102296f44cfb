// The egress folder's public API: the allowlist policy language, its decisions, and the proxy.
export {
  BrokeredSecretSchema,
  EgressPolicySchema,
  compileEgress,
  decideEgress,
  describeNetwork,
  secretPlaceholder,
} from './policy.js'
export type { CompiledEgress, EgressPolicy, EgressPolicyInput, EgressVerdict } from './policy.js'
export { EgressProxy } from './proxy.js'
export type { EgressAuditEvent, EgressProxyOptions, EgressSandboxContext } from './proxy.js'
export { assertEgressEnforceable } from './providers.js'
export { EgressRuleError, parseEgressRule, ruleMatches } from './rules.js'
export type { EgressRule } from './rules.js'
