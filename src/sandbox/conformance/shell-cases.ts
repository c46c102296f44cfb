/**
 * The persistent-shell cases of the provider conformance suite: what a provider whose handles set
 * `persistentShell` must do (state kept between calls, a timeout or cancel that keeps it, a shell
 * `exit` that restarts), and that one without it refuses `shell: 'persistent'` clearly. Imports
 * vitest: not re-exported from the sandbox index.
 */
import { expect, test } from 'vitest'
import { AppError } from '../../errors.js'
import { type ConformanceContext, expectHeadAndTail, rejectionOf } from './io-cases.js'
import { droppedMarker } from '../output-cap.js'
import type { ExecRequest, ExecResult } from '../types.js'

/** Registers the persistent-shell cases (or, for a provider without persistent shells, the refusal). */
export function registerShellCases(ctx: ConformanceContext): void {
  const { sandbox, base, profile, timeout } = ctx
  const sh = (command: string, extra: Partial<ExecRequest> = {}): Promise<ExecResult> =>
    sandbox().exec({ ...base, command, shell: 'persistent', ...extra })
  const supported = (): boolean => sandbox().persistentShell === true

  test('without persistent shells, shell: persistent is a BAD_REQUEST that says to use fresh', async () => {
    if (supported()) return expect(supported()).toBe(true)
    const err = await rejectionOf(sh('pwd'))
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('BAD_REQUEST')
    expect((err as AppError).message).toMatch(/persistent shell.*fresh/)
  })

  const shellTest = (name: string, fn: () => Promise<void>): void =>
    test(
      `persistent shell: ${name}`,
      async () => {
        if (!supported()) return expect(supported()).toBe(false)
        await fn()
      },
      timeout,
    )

  shellTest('cd stays for the next call; a fresh call is unaffected', async () => {
    await sh('cd /tmp')
    const r = await sh('pwd')
    expect(r.stdout).toBe('/tmp\n')
    expect(r.shellRestarted).toBe(false)
    expect((await ctx.run('pwd')).stdout).toBe(`${profile.cwd}\n`)
  })

  shellTest('exported variables, functions and aliases stay', async () => {
    await sh('export SBX_CONF_X=41; sbx_f() { echo "fn $1"; }; alias sbx_a="echo aliased"')
    const r = await sh('echo $((SBX_CONF_X + 1)); sbx_f arg; sbx_a')
    expect(r.stdout).toBe('42\nfn arg\naliased\n')
    expect((await ctx.run('echo "[$SBX_CONF_X]"')).stdout).toBe('[]\n')
  })

  shellTest('exit code and separate stdout / stderr as in a fresh shell', async () => {
    const r = await sh('echo out; echo err >&2; false || (exit 7)')
    expect(r).toMatchObject({ exitCode: 7, stdout: 'out\n', stderr: 'err\n', timedOut: false })
  })

  shellTest('an explicit cwd is a cd that stays; env is exported and stays', async () => {
    const r = await sh('pwd; echo "$SBX_CONF_E"', { cwd: '/', env: { SBX_CONF_E: "it's" } })
    expect(r.stdout).toBe("/\nit's\n")
    expect((await sh('pwd; echo "$SBX_CONF_E"')).stdout).toBe("/\nit's\n")
  })

  shellTest('stdin reaches the command', async () => {
    expect((await sh('cat', { stdin: 'one\ntwo\n' })).stdout).toBe('one\ntwo\n')
  })

  shellTest('the output cap truncates and the shell goes on', async () => {
    const r = await sh(`head -c 100000 /dev/zero | tr '\\0' x`, { outputCapBytes: 1000 })
    expect(r.truncated).toBe(true)
    expect(r.stdout).toBe('x'.repeat(500) + droppedMarker(100_000 - 1000) + 'x'.repeat(500))
    expect((await sh('echo ok')).stdout).toBe('ok\n')
  })

  shellTest('past the cap the result keeps the head and the tail, with the marker', async () => {
    await expectHeadAndTail(sh)
    expect((await sh('echo ok')).stdout).toBe('ok\n')
  })

  shellTest('a timeout kills the command and keeps the shell and its cwd', async () => {
    await sh('cd /tmp; export SBX_CONF_T=kept')
    const t = await sh('sleep 30', { timeoutMs: 500 })
    expect(t.timedOut).toBe(true)
    expect(t.durationMs).toBeLessThan(10_000)
    const r = await sh('pwd; echo $SBX_CONF_T')
    expect(r.stdout).toBe('/tmp\nkept\n')
    expect(r.shellRestarted).toBe(false)
  })

  shellTest('a timeout aborts the rest of the command, in a function or a loop too', async () => {
    const plain = await sh('sleep 30; echo late', { timeoutMs: 500 })
    expect(plain).toMatchObject({ timedOut: true, stdout: '' })
    const fn = await sh('sbx_slow() { sleep 30; echo in-fn; }; sbx_slow; echo after-fn', { timeoutMs: 500 })
    expect(fn).toMatchObject({ timedOut: true, stdout: '' })
    const loop = await sh('for i in 1 2 3; do sleep 30; echo "loop $i"; done; echo after-loop', {
      timeoutMs: 500,
    })
    expect(loop).toMatchObject({ timedOut: true, stdout: '' })
    // The next call runs whole, in the same shell.
    expect(await sh('echo one; echo two')).toMatchObject({ stdout: 'one\ntwo\n', shellRestarted: false })
  })

  shellTest('a cancel kills the command and keeps the shell', async () => {
    await sh('cd /tmp')
    const ac = new AbortController()
    let sawStart!: () => void
    const started = new Promise<void>((resolve) => (sawStart = resolve))
    const cancelled = sandbox().exec(
      { ...base, command: 'echo started; sleep 30', shell: 'persistent', timeoutMs: 60_000 },
      { signal: ac.signal, onStdout: (chunk) => chunk.includes('started') && sawStart() },
    )
    void cancelled.catch(() => undefined)
    await started
    ac.abort(new Error('conformance cancel'))
    expect(await rejectionOf(cancelled)).toBeInstanceOf(Error)
    const r = await sh('pwd')
    expect(r.stdout).toBe('/tmp\n')
    expect(r.shellRestarted).toBe(false)
    expect(r.durationMs).toBeLessThan(10_000)
  })

  shellTest('calls into one shell run one after another, never interleaved', async () => {
    const cmd = (tag: string): string => `echo ${tag}1; sleep 0.2; echo ${tag}2`
    const [a, b] = await Promise.all([sh(cmd('a')), sh(cmd('b'))])
    expect(a.stdout).toBe('a1\na2\n')
    expect(b.stdout).toBe('b1\nb2\n')
  })

  shellTest(
    'a shell killed from outside (OOM) ends the call; the next call gets a new one and says so',
    async () => {
      await sh('cd /tmp')
      const killed = await sh('kill -9 $$; sleep 30')
      expect(killed.durationMs).toBeLessThan(10_000)
      expect(killed.timedOut).toBe(false)
      const r = await sh('pwd')
      expect(r).toMatchObject({ exitCode: 0, stdout: `${profile.cwd}\n`, shellRestarted: true })
    },
  )

  shellTest('exit ends the shell; the next call gets a new one and says so', async () => {
    await sh('cd /tmp')
    const e = await sh('exit 3')
    expect(e.exitCode).toBe(3)
    const r = await sh('pwd')
    expect(r.exitCode).toBe(0)
    expect(r.shellRestarted).toBe(true)
    expect(r.stdout).toBe(`${profile.cwd}\n`)
    expect((await sh('pwd')).shellRestarted).toBe(false)
  })
}
