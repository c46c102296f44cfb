/**
 * Runs every benchmark in this folder, one after another, each in its own process (so one bench's
 * sandboxes and timers cannot skew the next).
 *
 *   npm run bench              # all
 *   npm run bench -- chain     # the ones whose file name contains "chain"
 */
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const filter = process.argv[2] ?? ''
const files = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run-all.ts' && !f.startsWith('_') && f.includes(filter))
  .sort()
let failed = 0
for (const f of files) {
  console.log(`\n=== bench/${f}`)
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, f)], { stdio: 'inherit' })
  if (r.status !== 0) failed++
}
process.exitCode = failed ? 1 : 0
