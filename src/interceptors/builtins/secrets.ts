/** A kind of credential the scanner recognises. */
export type SecretKind =
  'aws-access-key-id' | 'github-token' | 'slack-token' | 'private-key' | 'jwt' | 'assignment'

interface SecretPattern {
  kind: SecretKind
  re: RegExp
  /** Index of the capture group holding the secret itself; the whole match when absent. */
  group?: number
}

// Order matters: whole blocks first, so a key's body is not also reported piecemeal.
const PATTERNS: readonly SecretPattern[] = [
  {
    kind: 'private-key',
    re: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g,
  },
  { kind: 'aws-access-key-id', re: /\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[0-9A-Z]{16}\b/g },
  { kind: 'github-token', re: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g },
  {
    kind: 'slack-token',
    re: /\bxox[abposre]-[A-Za-z0-9-]{10,250}\b|https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9/_-]{20,}/g,
  },
  { kind: 'jwt', re: /\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}/g },
  {
    kind: 'assignment',
    re: /\b(?:password|passwd|pwd|secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret|aws_secret_access_key)\b["']?\s*[:=]\s*(["']?)([^\s"'`,;&]{4,})\1/gi,
    group: 2,
  },
]

/** One credential found in a text. */
export interface SecretFinding {
  kind: SecretKind
  /** Offset of the secret in the text. */
  start: number
  end: number
}

/** Finds credentials in `text` (non-overlapping, in text order). */
export function scanSecrets(text: string): SecretFinding[] {
  const found: SecretFinding[] = []
  for (const { kind, re, group } of PATTERNS) {
    for (const m of text.matchAll(re)) {
      const value = group !== undefined ? m[group] : m[0]
      if (!value) continue
      const start = (m.index ?? 0) + (group !== undefined ? m[0].lastIndexOf(value) : 0)
      const end = start + value.length
      if (!found.some((f) => start < f.end && end > f.start)) found.push({ kind, start, end })
    }
  }
  return found.sort((a, b) => a.start - b.start)
}

/** Replaces every credential in `text` with `[REDACTED:<kind>]`. */
export function redactSecrets(text: string): { text: string; findings: SecretFinding[] } {
  const findings = scanSecrets(text)
  if (findings.length === 0) return { text, findings }
  let out = ''
  let at = 0
  for (const f of findings) {
    out += text.slice(at, f.start) + `[REDACTED:${f.kind}]`
    at = f.end
  }
  return { text: out + text.slice(at), findings }
}
