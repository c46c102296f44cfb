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
export { assertEgressEnforceable, describeEnforcement, egressCaps, egressSupport } from './providers.js'
export type { EgressPart, EgressSupport } from './providers.js'
export { EgressUnenforceableError, daytonaNetwork, e2bNetwork } from './remote.js'
export type { DaytonaNetworkFields, E2BNetworkFields, ProfileNetwork } from './remote.js'
export { EgressRuleError, parseEgressRule, ruleCovers, ruleMatches } from './rules.js'
export type { EgressRule } from './rules.js'
