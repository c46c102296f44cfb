import { readFileSync } from 'node:fs'

/**
 * The code samples of a Markdown file: every ```ts (or ```yaml) fence. A sample may be preceded (on the line
 * right before its fence) by `<!-- sample: <prelude> -->`: TypeScript put before the sample when it is
 * compiled, for the names a sample uses without defining them, e.g.
 * `<!-- sample: declare const model: ModelClient; import type { ModelClient } from 'sandbox-router' -->`.
 * `<!-- sample: nocheck -->` leaves a fence out: only for a fragment that cannot compile on its own
 * (keep these rare; a prelude is the usual fix).
 */
export interface DocSample {
  readonly lang: 'ts' | 'yaml'
  readonly file: string
  /** 1-based line of the sample's first code line. */
  readonly line: number
  readonly prelude: string
  readonly code: string
}

const FENCE_OPEN: Record<DocSample['lang'], RegExp> = { ts: /^```(ts|typescript)\s*$/, yaml: /^```ya?ml\s*$/ }
/** The prelude that marks a fence as a fragment, not compiled. */
const NOCHECK = 'nocheck'
const PRELUDE = /^<!--\s*sample:\s*([\s\S]*?)\s*-->\s*$/

/** Extracts the `lang` {@link DocSample}s (```ts or ```yaml fences) from the Markdown file at `file`. */
export function docSamples(file: string, lang: DocSample['lang'] = 'ts'): DocSample[] {
  const lines = readFileSync(file, 'utf8').split('\n')
  const samples: DocSample[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!FENCE_OPEN[lang].test(lines[i] ?? '')) continue
    const prelude = PRELUDE.exec(lines[i - 1] ?? '')?.[1] ?? ''
    const start = i + 1
    let end = start
    while (end < lines.length && !/^```\s*$/.test(lines[end] ?? '')) end++
    if (prelude === NOCHECK) {
      i = end
      continue
    }
    samples.push({ lang, file, line: start + 1, prelude, code: lines.slice(start, end).join('\n') })
    i = end
  }
  return samples
}
