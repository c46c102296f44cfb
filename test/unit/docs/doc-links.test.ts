import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'

/**
 * The README is a map: every relative link in it, in RELIABILITY.md, BENCHMARKS.md and docs/**, points
 * at a file of the repository, and a `#fragment` into a Markdown file names one of its headings (as
 * GitHub derives heading ids). A moved or renamed section breaks this test, not the reader. The README
 * stays a map: short, and linking every page of docs/.
 */
const ROOT = resolve(import.meta.dirname, '../../..')
const DOCS = [
  'README.md',
  'RELIABILITY.md',
  'BENCHMARKS.md',
  ...readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
]

/** The Markdown outside code: fenced blocks and inline code spans blanked (their links are not links). */
function prose(markdown: string): string[] {
  let fenced = false
  return markdown.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced
      return ''
    }
    return fenced ? '' : line.replace(/`[^`]*`/g, '')
  })
}

/** GitHub's id of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

function anchors(file: string): Set<string> {
  const ids = new Set<string>()
  let fenced = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced
    const h = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line)
    if (h?.[1] !== undefined) ids.add(slug(h[1]))
  }
  return ids
}

describe('the links of the docs', () => {
  test('every relative link names an existing file and heading', () => {
    const broken: string[] = []
    let checked = 0
    for (const doc of DOCS) {
      const file = join(ROOT, doc)
      prose(readFileSync(file, 'utf8')).forEach((line, i) => {
        for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          const href = m[1] ?? ''
          if (/^[a-z]+:/i.test(href)) continue
          const [path = '', fragment] = href.split('#')
          const target = path === '' ? file : resolve(dirname(file), path)
          checked++
          const where = `${doc}:${i + 1}: ${href}`
          if (!existsSync(target)) broken.push(`${where}: no file ${relative(ROOT, target)}`)
          else if (fragment && target.endsWith('.md') && !anchors(target).has(fragment))
            broken.push(`${where}: no heading #${fragment} in ${relative(ROOT, target)}`)
        }
      })
    }
    expect(checked).toBeGreaterThan(10)
    expect(broken).toEqual([])
  })

  test('the README is a map: at most 200 lines, linking every page of docs/', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    expect(readme.split('\n').length).toBeLessThanOrEqual(200)
    const links = prose(readme)
      .join('\n')
      .matchAll(/\]\((docs\/[^)#\s]+)/g)
    const linked = new Set([...links].map((m) => m[1]))
    expect(DOCS.filter((d) => d.startsWith('docs/') && !linked.has(d))).toEqual([])
  })
})
