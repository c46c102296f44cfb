/**
 * The provider conformance suite. Every provider (built-in or third-party) runs it from a vitest
 * file against a real backend:
 *
 * ```ts
 * import { runProviderConformance } from 'sandbox-router/conformance'
 * runProviderConformance('my-provider', { createProvider: () => createMyProvider(), profile })
 * ```
 *
 * It imports vitest, so it is an entry of its own (`sandbox-router/conformance`, vitest a peer
 * dependency) and not re-exported from `src/sandbox/index.ts`. The cases live next to it: I/O
 * (io-cases.ts), persistent shells (shell-cases.ts), processes (process-cases.ts), code (code-cases.ts).
 */
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { CONFORMANCE_RUN_LABEL } from '../labels.js'
import { registerIoCases, rejectionOf } from './io-cases.js'
import { registerCodeCases } from './code-cases.js'
import { registerProcessCases } from './process-cases.js'
import { registerShellCases } from './shell-cases.js'
import type { ResolvedProfile } from '../profiles.js'
import type { ExecRequest, ExecResult, Labels, Sandbox, SandboxProvider } from '../types.js'

/** Options of {@link runProviderConformance}. */
export interface ConformanceOptions {
  /** Makes a provider instance; called once per suite and again to act as "another process". */
  createProvider: () => SandboxProvider | Promise<SandboxProvider>
  /** Profile every sandbox of the suite is created with. */
  profile: ResolvedProfile
  /** Extra labels on every sandbox (a unique run label is always added). */
  labels?: Labels
  /** Timeout of each test (ms). @default 60000 */
  testTimeoutMs?: number
  /** Size of the large-output test (bytes). @default 5242880 */
  largeOutputBytes?: number
  /** Commands run at once in the concurrency test. @default min(profile.maxConcurrentExecs, 8) */
  concurrency?: number
}

/** Label key carrying the suite run id; `afterAll` destroys everything carrying it (labels.ts). */
export { CONFORMANCE_RUN_LABEL }

/** Registers the conformance tests for one provider. */
export function runProviderConformance(name: string, options: ConformanceOptions): void {
  const { profile } = options
  const timeout = options.testTimeoutMs ?? 60_000
  const largeBytes = options.largeOutputBytes ?? 5 * 1024 * 1024
  const concurrency = options.concurrency ?? Math.min(profile.maxConcurrentExecs, 8)
  const runId = randomUUID()
  const labels: Labels = { ...options.labels, [CONFORMANCE_RUN_LABEL]: runId }
  const base = { timeoutMs: 30_000, outputCapBytes: 1024 * 1024 }
  let provider: SandboxProvider
  let sb: Sandbox
  const run = (command: string, extra: Partial<ExecRequest> = {}): Promise<ExecResult> =>
    sb.exec({ ...base, command, ...extra })
  /** Polls inside the sandbox (bounded) until the process in `pidFile` is gone. */
  const processGone = async (pidFile: string): Promise<string> =>
    (
      await run(
        `pid=$(cat ${pidFile}); i=0; while kill -0 "$pid" 2>/dev/null; do i=$((i+1)); ` +
          `[ $i -gt 100 ] && { echo alive; exit; }; sleep 0.05; done; echo gone`,
      )
    ).stdout.trim()

  describe(`provider conformance: ${name}`, () => {
    beforeAll(async () => {
      provider = await options.createProvider()
      sb = await provider.create(profile, { labels })
    }, timeout)

    afterAll(async () => {
      if (!provider) return
      for (const ref of await provider.list({ labels: { [CONFORMANCE_RUN_LABEL]: runId } })) {
        await provider.destroy(ref)
      }
      expect(await provider.list({ labels: { [CONFORMANCE_RUN_LABEL]: runId } })).toEqual([])
      await provider.close?.()
    }, timeout)

    test('create returns a handle whose ref names the provider and profile', () => {
      expect(sb.ref.providerId).toBe(provider.id)
      expect(sb.ref.profile).toBe(profile.name)
      expect(sb.ref.id).toBeTruthy()
    })

    test(
      'exec returns stdout, exit code 0 and a duration',
      async () => {
        const r = await run('echo hello')
        expect(r).toMatchObject({
          exitCode: 0,
          stdout: 'hello\n',
          stderr: '',
          timedOut: false,
          truncated: false,
        })
        expect(r.sandboxId).toBe(sb.ref.id)
        expect(r.durationMs).toBeGreaterThanOrEqual(0)
      },
      timeout,
    )

    test(
      'exit codes are reported',
      async () => {
        expect((await run('exit 7')).exitCode).toBe(7)
        expect((await run('false')).exitCode).toBe(1)
        expect((await run('nonexistent-command-xyz')).exitCode).toBe(127)
      },
      timeout,
    )

    test(
      'stderr is kept separate from stdout',
      async () => {
        const r = await run('echo out; echo err >&2; echo out2')
        expect(r.stdout).toBe('out\nout2\n')
        expect(r.stderr).toBe('err\n')
      },
      timeout,
    )

    test(
      'cwd defaults to the profile cwd; request cwd and env apply',
      async () => {
        expect((await run('pwd')).stdout.trim()).toBe(profile.cwd)
        expect((await run('pwd', { cwd: '/tmp' })).stdout.trim()).toBe('/tmp')
        const r = await run('echo "$SBX_A-$SBX_B"', { env: { SBX_A: 'one', SBX_B: 'two words' } })
        expect(r.stdout).toBe('one-two words\n')
        for (const [k, v] of Object.entries(profile.env)) {
          expect((await run(`printf %s "$${k}"`)).stdout).toBe(v)
        }
      },
      timeout,
    )

    test(
      'stdin bytes are delivered, then EOF',
      async () => {
        expect((await run('cat', { stdin: 'line1\nline2\n' })).stdout).toBe('line1\nline2\n')
        expect((await run('wc -c', { stdin: new Uint8Array([0, 1, 2, 255]) })).stdout.trim()).toBe('4')
        // No stdin: the command sees EOF at once instead of hanging.
        expect((await run('cat; echo eof')).stdout).toBe('eof\n')
      },
      timeout,
    )

    test(
      'quoting, pipes, unicode and shell syntax survive',
      async () => {
        const r = await run(`printf '%s\\n' "a b" 'c"d' '$HOME' 'ünï😀' | sort | tr '\\n' '|'`)
        expect(r.stdout).toBe('$HOME|a b|c"d|ünï😀|')
        expect((await run('x=3; if [ $x -gt 2 ]; then echo big; fi && echo and || echo or')).stdout).toBe(
          'big\nand\n',
        )
      },
      timeout,
    )

    registerIoCases({ sandbox: () => sb, run, processGone, base, profile, timeout, largeBytes })
    registerShellCases({ sandbox: () => sb, run, processGone, base, profile, timeout, largeBytes })
    registerProcessCases({ sandbox: () => sb, run, processGone, base, profile, timeout, largeBytes })
    registerCodeCases({ sandbox: () => sb, run, processGone, base, profile, timeout, largeBytes })

    test(
      'connect by ref from another provider instance sees the same sandbox',
      async () => {
        await sb.writeFile('shared.txt', 'from first handle')
        const other = await options.createProvider()
        const second = await other.connect(sb.ref)
        try {
          expect(second.ref.id).toBe(sb.ref.id)
          expect(Buffer.from(await second.readFile('shared.txt')).toString()).toBe('from first handle')
          expect((await second.exec({ ...base, command: 'cat shared.txt' })).stdout).toBe('from first handle')
          if (sb.persistentShell) {
            // Another handle's shell does not hold this one's state, and both say so: never silent.
            await run('cd /tmp', { shell: 'persistent' })
            const there = await second.exec({ ...base, command: 'pwd', shell: 'persistent' })
            expect(there).toMatchObject({ stdout: `${profile.cwd}\n`, shellRestarted: true })
            const back = await run('pwd', { shell: 'persistent' })
            expect(back).toMatchObject({ stdout: '/tmp\n', shellRestarted: true })
            expect((await run('pwd', { shell: 'persistent' })).shellRestarted).toBe(false)
          }
        } finally {
          await second.close()
          await other.close?.()
        }
        expect((await run('echo still')).stdout).toBe('still\n')
      },
      timeout,
    )

    test(
      'list finds sandboxes by label',
      async () => {
        const refs = await provider.list({ labels: { [CONFORMANCE_RUN_LABEL]: runId } })
        expect(refs.map((r) => r.id)).toContain(sb.ref.id)
        expect(await provider.list({ labels: { [CONFORMANCE_RUN_LABEL]: randomUUID() } })).toEqual([])
      },
      timeout,
    )

    test(
      `${concurrency * 2} commands at once in one sandbox all complete correctly`,
      async () => {
        const n = concurrency * 2
        const results = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            run(`sleep 0.2; echo out-${i}; echo err-${i} >&2; exit ${i % 5}`),
          ),
        )
        results.forEach((r, i) => {
          expect(r).toMatchObject({ stdout: `out-${i}\n`, stderr: `err-${i}\n`, exitCode: i % 5 })
        })
      },
      timeout,
    )

    test(
      'health reports ok for a live sandbox and a reachable backend',
      async () => {
        expect(await sb.health()).toMatchObject({ ok: true })
        if (provider.health) expect(await provider.health()).toMatchObject({ ok: true })
      },
      timeout,
    )

    test(
      'destroy: later calls fail with SANDBOX_LOST; destroying again is fine',
      async () => {
        const doomed = await provider.create(profile, { labels })
        expect((await doomed.exec({ ...base, command: 'echo up' })).stdout).toBe('up\n')
        await provider.destroy(doomed.ref)
        expect(await rejectionOf(doomed.exec({ ...base, command: 'echo hi' }))).toMatchObject({
          code: 'SANDBOX_LOST',
        })
        expect(await rejectionOf(provider.connect(doomed.ref))).toMatchObject({ code: 'SANDBOX_LOST' })
        await provider.destroy(doomed.ref)
        const refs = await provider.list({ labels: { [CONFORMANCE_RUN_LABEL]: runId } })
        expect(refs.map((r) => r.id)).not.toContain(doomed.ref.id)
        await doomed.close()
      },
      timeout,
    )
  })
}
