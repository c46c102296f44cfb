/**
 * The HTTP layer's own cost: CPU time `sbx serve` spends per `POST /v1/exec` that is refused after its
 * body was read, checked and validated (an unknown provider: 400 `UNKNOWN_PROVIDER`, no job, no
 * sandbox), so only the request path is measured. With `--baseline <checkout>` it also starts that
 * checkout's `sbx serve` and the two take turns in blocks of `--block` requests, so a machine whose
 * speed drifts slows both alike; prints µs of server CPU (user + system, /proc) per request, and the ratio.
 *
 *   npx tsx bench/http-request-cpu.ts                                  # this checkout alone
 *   npx tsx bench/http-request-cpu.ts --baseline /work/wt-base --requests 3000
 *
 * Needs Linux (/proc); no Docker engine or Redis (the embedded default, nothing runs).
 */
import http from 'node:http'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { startSbxServer } from '../test/support/sbx-cli.js'
import { cpuMs } from './lib/proc-cpu.js'
import type { ConfigInput } from '../src/config/schema.js'

const { values: flags } = parseArgs({
  options: {
    baseline: { type: 'string' },
    requests: { type: 'string', default: '3000' },
    block: { type: 'string', default: '300' },
  },
})
const requests = Math.max(100, Number(flags.requests) || 3000)
const block = Math.max(10, Number(flags.block) || 300)

const config = { quotas: { requestsPerSecond: 1_000_000 } } as ConfigInput
const here = join(fileURLToPath(new URL('.', import.meta.url)), '..')
const checkouts: [string, string][] = [
  ['this checkout', here],
  ...(flags.baseline ? [['baseline', resolve(flags.baseline)] as [string, string]] : []),
]
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
const body = JSON.stringify({ provider: 'nope', profile: 'default', sessionId: 's1', command: 'echo hi' })

function refused(url: string, key: string): Promise<void> {
  return new Promise((ok, fail) => {
    const req = http.request(
      `${url}/v1/exec`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        res.resume()
        res.on('end', () =>
          res.statusCode === 400 ? ok() : fail(new Error(`expected 400, got ${res.statusCode}`)),
        )
      },
    )
    req.on('error', fail)
    req.end(body)
  })
}

const arms = await Promise.all(
  checkouts.map(async ([name, dir]) => {
    const server = await startSbxServer('serve', {
      config,
      env: { LOG_LEVEL: 'warn' },
      ...(dir === here ? {} : { sbx: join(dir, 'bin', 'sbx.js') }),
    })
    return { name, dir, server, cpu: 0, n: 0 }
  }),
)
try {
  for (const arm of arms) for (let i = 0; i < block; i++) await refused(arm.server.url, arm.server.key)
  for (let done = 0; done < requests; done += block) {
    for (const arm of arms) {
      const pid = arm.server.child.child.pid ?? 0
      const before = cpuMs(pid)
      for (let i = 0; i < block; i++) await refused(arm.server.url, arm.server.key)
      arm.cpu += cpuMs(pid) - before
      arm.n += block
    }
  }
  for (const arm of arms)
    console.log(
      `${arm.name.padEnd(14)} ${((1000 * arm.cpu) / arm.n).toFixed(0).padStart(6)} µs server CPU per refused POST /v1/exec  (${arm.dir})`,
    )
  const [a, b] = arms
  if (a && b) console.log(`this checkout/baseline: ${(a.cpu / a.n / (b.cpu / b.n)).toFixed(2)}`)
} finally {
  for (const arm of arms) await arm.server.stop()
}
