import { createHash } from 'node:crypto'
import { Sandbox } from 'e2b'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type E2BConnection, e2bServe } from '../support/e2b-serve.js'

const KEY = `acme_e2bbp_${'b'.repeat(24)}`
/** The output buffer per stream: a command's output is 130 times as much. */
const RING = 64 * 1024
/** `seq 1 LINES` prints 8 488 896 bytes (8.1 MiB). */
const LINES = 1_200_000
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex')

/**
 * Output of E2B commands is back-pressured, as under envd: `commands.run` of a command that prints
 * far more than `quotas.processOutputBytes` returns all of it, in order (through `node bin/sbx.js
 * serve` and the real `e2b` SDK).
 */
describe('E2B endpoint: commands.run returns output far larger than the output buffer', () => {
  const e2b = e2bServe('e2bbp')
  const { scope } = e2b
  let conn: E2BConnection

  beforeAll(async () => {
    await e2b.start({
      config: {
        e2b: { templates: { base: 'e2b' } },
        quotas: { requestsPerSecond: 1000, processOutputBytes: RING },
      },
      env: { SBX_API_KEY: KEY },
      key: KEY,
      sdkEnv: false,
    })
    conn = e2b.conn
  }, 180_000)

  afterAll(() => e2b.stop(), 120_000)

  test(`${LINES} lines (8 MiB) through a 64 KiB buffer arrive whole: length and sha256`, async () => {
    const expected = Array.from({ length: LINES }, (_, i) => `${i + 1}\n`).join('')
    const sbx = await Sandbox.create('base', { ...conn, metadata: { suite: scope } })
    try {
      let chunks = 0
      const started = Date.now()
      const r = await sbx.commands.run(`seq 1 ${LINES}; echo done >&2`, {
        onStdout: () => void chunks++,
        timeoutMs: 120_000,
      })
      const ms = Date.now() - started
      expect(r.exitCode).toBe(0)
      expect(r.stderr).toBe('done\n')
      expect(r.stdout.length).toBe(expected.length)
      expect(sha256(r.stdout)).toBe(sha256(expected))
      // It came in many pieces: the ring never held more than 64 KiB of it.
      expect(chunks).toBeGreaterThanOrEqual(Math.floor(expected.length / RING))
      console.log(`e2b backpressure: ${expected.length} bytes in ${chunks} chunks, ${ms} ms`)
    } finally {
      await sbx.kill()
    }
  }, 180_000)
})
