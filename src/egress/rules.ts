import { BlockList, isIP } from 'node:net'

/**
 * One egress rule as written in a profile's `network.allow` (or a tenant cap):
 * `api.example.com` (that host, ports 80 and 443), `*.example.org:443` (every subdomain, not the
 * apex, on that port), `10.1.0.0/16` or `10.1.2.3` (addresses, any port unless `:port` is given;
 * IPv6 as `[fd00::/8]:443` or `fd00::/8`), and `host:*` for every port.
 */
export type EgressRule =
  | { kind: 'host'; text: string; host: string; wildcard: boolean; ports: readonly number[] | 'any' }
  | {
      kind: 'cidr'
      text: string
      list: BlockList
      ports: readonly number[] | 'any'
      /** The address as written (any address inside the prefix) and the prefix length. */
      address: string
      bits: number
      family: 4 | 6
    }

const DEFAULT_PORTS = [80, 443] as const
const HOST_RE = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/

/** An egress rule that does not parse; the message says what is wrong and what is accepted. */
export class EgressRuleError extends Error {
  override readonly name = 'EgressRuleError'
}

function parsePort(text: string, rule: string): number[] | 'any' {
  if (text === '*') return 'any'
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1 || n > 65_535)
    throw new EgressRuleError(`egress rule '${rule}': port '${text}' is not 1-65535 or '*'`)
  return [n]
}

/** Splits `host:port`, `[v6]:port`, bare v6 and CIDRs into address and optional port. */
function splitPort(rule: string): { addr: string; port?: string } {
  const v6 = /^\[([^\]]+)\](?::(.+))?$/.exec(rule)
  if (v6) return { addr: v6[1] ?? '', ...(v6[2] !== undefined ? { port: v6[2] } : {}) }
  const colons = rule.split(':').length - 1
  if (colons === 1) {
    const [addr = '', port = ''] = rule.split(':')
    return { addr, port }
  }
  return { addr: rule } // no port, or a bare IPv6 address / prefix
}

/** Parses one rule; throws {@link EgressRuleError} with a fix for a bad one. */
export function parseEgressRule(text: string): EgressRule {
  const rule = text.trim().toLowerCase()
  if (!rule) throw new EgressRuleError('egress rule is empty; write a host, *.domain, or a CIDR')
  if (rule.includes('://'))
    throw new EgressRuleError(
      `egress rule '${text}' is a URL; write only the host (and ':port'), e.g. 'api.example.com:443'`,
    )
  const { addr, port } = splitPort(rule)
  const [ip = '', prefix] = addr.split('/')
  const family = isIP(ip)
  if (family) {
    const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix)
    if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128))
      throw new EgressRuleError(`egress rule '${text}': prefix '/${prefix}' is out of range`)
    const list = new BlockList()
    list.addSubnet(ip, bits, family === 4 ? 'ipv4' : 'ipv6')
    return {
      kind: 'cidr',
      text,
      list,
      ports: port === undefined ? 'any' : parsePort(port, text),
      address: ip,
      bits,
      family: family === 4 ? 4 : 6,
    }
  }
  if (prefix !== undefined)
    throw new EgressRuleError(
      `egress rule '${text}': '${ip}' is not an IP address, so it cannot have a /prefix`,
    )
  if (!HOST_RE.test(addr))
    throw new EgressRuleError(
      `egress rule '${text}' is not a host name ('api.example.com'), a wildcard ('*.example.org'), an IP or a CIDR ('10.0.0.0/8'), each optionally with ':port' or ':*'`,
    )
  const wildcard = addr.startsWith('*.')
  return {
    kind: 'host',
    text,
    host: wildcard ? addr.slice(2) : addr,
    wildcard,
    ports: port === undefined ? [...DEFAULT_PORTS] : parsePort(port, text),
  }
}

function portMatches(ports: readonly number[] | 'any', port: number): boolean {
  return ports === 'any' || ports.includes(port)
}

/**
 * Whether `rule` lets a connection to `host:port` through. `host` is a lower-case name or an IP
 * literal; a host rule never matches an IP literal (and a CIDR rule never a name), so a name rule
 * cannot be bypassed by dialling the address it resolves to.
 */
export function ruleMatches(rule: EgressRule, host: string, port: number): boolean {
  if (!portMatches(rule.ports, port)) return false
  const family = isIP(host)
  if (rule.kind === 'cidr') return family !== 0 && rule.list.check(host, family === 4 ? 'ipv4' : 'ipv6')
  if (family) return false
  return rule.wildcard ? host.endsWith(`.${rule.host}`) : host === rule.host
}

/**
 * Whether every destination `inner` lets through is also let through by `outer` (a tenant cap rule
 * covering a profile rule): same kind, ports a subset, and the names or addresses inside.
 */
export function ruleCovers(outer: EgressRule, inner: EgressRule): boolean {
  const outerPorts = outer.ports
  const ports =
    outerPorts === 'any' || (inner.ports !== 'any' && inner.ports.every((p) => outerPorts.includes(p)))
  if (!ports) return false
  if (outer.kind === 'cidr' || inner.kind === 'cidr') {
    if (outer.kind !== 'cidr' || inner.kind !== 'cidr' || outer.family !== inner.family) return false
    // inner's prefix is at most as wide and holds an address of outer's: all of it is inside outer
    return outer.bits <= inner.bits && outer.list.check(inner.address, inner.family === 4 ? 'ipv4' : 'ipv6')
  }
  if (!outer.wildcard) return !inner.wildcard && inner.host === outer.host
  return inner.host.endsWith(`.${outer.host}`) || (inner.wildcard && inner.host === outer.host)
}
