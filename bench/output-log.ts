/**
 * What numbering and retaining live output costs per chunk in the fleet: the chunk script of this
 * tree (publish + numbered log + bounded tail, via RedisFenceStore.publishChunk) vs the chunk script
 * of the baseline (publish + bounded tail), side by side on the same Redis connection, interleaved.
 * Each sample is one chunk published and a round trip awaited behind it (PING), as a worker's
 * pipelined publishes are followed by its next command.
 *
 *   npx tsx bench/output-log.ts      # BENCH_ITERATIONS (default 3000), REDIS_URL
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { FenceKeys, RedisFenceStore } from '../src/queue/redis-common/redis-fence.js'

const iterations = Math.min(Math.max(Number(process.env.BENCH_ITERATIONS ?? 3000) || 3000, 100), 50_000)
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
const base = `bench-outlog-${randomUUID().slice(0, 8)}`

// The baseline's chunk script (before the numbered log), as it was in src/queue/redis-common/redis-fence.ts.
redis.defineCommand('benchChunkBefore', {
  numberOfKeys: 1,
  lua: `
redis.call('PUBLISH', ARGV[1], ARGV[2])
if redis.call('STRLEN', KEYS[1]) < tonumber(ARGV[4]) then
  redis.call('APPEND', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return 1
`,
})
const before = (redis as unknown as { benchChunkBefore: (...a: (string | number)[]) => Promise<unknown> })
  .benchChunkBefore
const store = new RedisFenceStore(redis, new FenceKeys(base), {
  retentionMs: 60_000,
  tailCapBytes: 65_536,
  logCapBytes: 1024 * 1024,
})

const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN
const data = 'x'.repeat(4096) // a typical live chunk of a chatty command

try {
  for (const size of [16, 4096]) {
    const chunk = data.slice(0, size)
    const times = { before: [] as number[], after: [] as number[] }
    for (let i = 0; i < iterations; i++) {
      const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const)
      for (const which of order) {
        const t = performance.now()
        if (which === 'before') {
          void before.call(redis, `${base}:{b}:out`, `${base}:job:b`, `o${chunk}`, chunk, 65_536, 60_000)
        } else {
          store.publishChunk('a', { stream: 'stdout', data: chunk })
        }
        await redis.ping()
        times[which].push(performance.now() - t)
      }
    }
    const b = p50(times.before)
    const a = p50(times.after)
    console.log(
      `chunk of ${String(size).padStart(4)} B: p50 before ${(b * 1000).toFixed(0).padStart(5)} µs  ` +
        `after ${(a * 1000).toFixed(0).padStart(5)} µs  ratio ${(a / b).toFixed(3)}  (+${((a - b) * 1000).toFixed(0)} µs)`,
    )
  }
} finally {
  const keys = await redis.keys(`${base}*`)
  if (keys.length > 0) await redis.del(...keys)
  redis.disconnect()
}
