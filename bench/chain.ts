/**
 * Cost of one tool-call evaluation through a chain of N interceptors, against a baseline that calls
 * the same `beforeToolCall` functions directly in a loop (same process, interleaved rounds).
 *
 *   npx tsx bench/chain.ts
 */
import { ToolCallDecision, evaluateToolCall } from '../src/interceptors/index.js'
import type { ToolCallInterceptor, ToolCallRequest } from '../src/interceptors/index.js'

const request: ToolCallRequest = {
  name: 'read_file',
  arguments: '{"path":"a"}',
  callId: 'c',
  type: 'function',
}

function makeChain(n: number): ToolCallInterceptor[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `ic-${i}`,
    beforeToolCall: (r: ToolCallRequest) =>
      r.name === 'bash' ? ToolCallDecision.block('x') : ToolCallDecision.allow(),
  }))
}

async function viaChain(chain: ToolCallInterceptor[], iters: number): Promise<number> {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iters; i++) await evaluateToolCall(chain, request)
  return Number(process.hrtime.bigint() - t0) / iters
}

async function direct(chain: ToolCallInterceptor[], iters: number): Promise<number> {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iters; i++) {
    // The baseline is an async function too: what a hand-written loop over the interceptors costs.
    await (async () => {
      for (const ic of chain) {
        const d = ic.beforeToolCall(request, {})
        if ((d as { kind: string }).kind !== 'allow') return d
      }
      return ToolCallDecision.allow()
    })()
  }
  return Number(process.hrtime.bigint() - t0) / iters
}

const median = (xs: number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN

export async function benchChain(): Promise<string[]> {
  const lines = [
    'chain: ns per evaluation (median of 15 interleaved rounds)',
    'n    chain ns   direct ns   ns/interceptor (chain)   overhead vs direct',
  ]
  for (const n of [1, 10, 100]) {
    const chain = makeChain(n)
    const iters = Math.max(2_000, Math.floor(200_000 / n))
    await viaChain(chain, iters) // warm-up
    await direct(chain, iters)
    const a: number[] = []
    const b: number[] = []
    for (let r = 0; r < 15; r++) {
      a.push(await viaChain(chain, iters))
      b.push(await direct(chain, iters))
    }
    const c = median(a)
    const d = median(b)
    lines.push(
      `${String(n).padEnd(4)} ${c.toFixed(0).padStart(8)}   ${d.toFixed(0).padStart(9)}   ${(c / n).toFixed(1).padStart(22)}   ${(c / d).toFixed(2).padStart(6)}x (+${(c - d).toFixed(0)} ns)`,
    )
  }
  lines.push('reference: a queue hop is ~1 ms = 1,000,000 ns')
  return lines
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await benchChain()) console.log(l)
}
