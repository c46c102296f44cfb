import type { Duplex } from 'node:stream'
import { afterAll, describe, expect, test } from 'vitest'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { e2bFixture, quick, rejectionOf } from '../../../support/e2b-fixture.js'

/**
 * Terminals of the E2B provider on E2B's PTYs (`sandbox.pty`), against our E2B-compatible endpoint
 * backed by Docker: input and output, resize, exit, kill, a command instead of bash, bad input.
 */
const T = 120_000
const endpoint = await startE2BEndpoint()
const fx = e2bFixture(endpoint)

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
  expect(await endpoint.close()).toBe(0)
}, T)

/** Resolves with everything the stream showed once `pattern` appeared in it. */
const until = (s: Duplex, pattern: RegExp): Promise<string> =>
  new Promise((resolve) => {
    let seen = ''
    const on = (d: Buffer): void => {
      seen += d.toString()
      if (pattern.test(seen)) {
        s.off('data', on)
        resolve(seen)
      }
    }
    s.on('data', on)
  })

/** Everything the stream shows until it ends. */
const rest = (s: Duplex): Promise<string> =>
  new Promise((resolve) => {
    let seen = ''
    s.on('data', (d: Buffer) => (seen += d.toString()))
    s.once('end', () => resolve(seen))
  })

describe('e2b provider terminals', () => {
  test(
    'input and output: bash with the env given, in the profile cwd, its pid the shell’s; exit ends it',
    async () => {
      const sb = await fx.create()
      expect(sb.terminals).toBe(true)
      const t = await sb.openTerminal!({ cols: 80, rows: 24, env: { SBX_TERM_VAR: 'bar' } })
      const out = until(t.stream, /pid=\d+ bar-2 \/\S+ xterm-256color/)
      t.stream.write('echo pid=$$ $SBX_TERM_VAR-$((1+1)) $PWD $TERM\n')
      const line = /pid=(\d+) bar-2 (\/\S+)/.exec(await out)
      expect(Number(line?.[1])).toBe(t.pid)
      expect(line?.[2]).toBe('/workspace')
      const ended = rest(t.stream)
      t.stream.write('exit 3\n')
      expect(await t.exited).toEqual({ exitCode: 3 })
      await ended
    },
    T,
  )

  test(
    'resize: the shell sees the new size, in order with the input after it',
    async () => {
      const sb = await fx.create()
      const t = await sb.openTerminal!({ cols: 80, rows: 24 })
      const first = until(t.stream, /size=24 80/)
      t.stream.write('echo size=$(stty size)\n')
      await first
      t.resize(100, 30)
      const second = until(t.stream, /size=30 100/)
      t.stream.write('echo size=$(stty size)\n')
      await second
      expect(() => t.resize(0, 30)).toThrow(/cols 0 is out of range/)
      t.close()
      await t.exited
    },
    T,
  )

  test(
    'close kills the shell (SIGKILL) and ends the stream; a second close is a no-op',
    async () => {
      const sb = await fx.create()
      const t = await sb.openTerminal!({ cols: 80, rows: 24 })
      const ready = until(t.stream, /ready-2/)
      t.stream.write('echo ready-$((1+1))\n')
      await ready
      const ended = rest(t.stream)
      t.close()
      t.close()
      expect(await t.exited).toEqual({ exitCode: null, signal: 'SIGKILL' })
      await ended
      const r = await sb.exec({
        ...quick,
        command: `kill -0 ${t.pid} 2>/dev/null && echo alive || echo gone`,
      })
      expect(r.stdout).toBe('gone\n')
    },
    T,
  )

  test(
    'destroying the stream closes the terminal',
    async () => {
      const sb = await fx.create()
      const t = await sb.openTerminal!({ cols: 80, rows: 24 })
      t.stream.destroy()
      expect(await t.exited).toEqual({ exitCode: null, signal: 'SIGKILL' })
    },
    T,
  )

  test(
    'a command runs instead of bash, with the same pid, in a cwd relative to the profile’s, and no prompt',
    async () => {
      const sb = await fx.create()
      await sb.exec({ ...quick, command: 'mkdir -p /workspace/sub' })
      const t = await sb.openTerminal!({
        cols: 80,
        rows: 24,
        cwd: 'sub',
        env: { PROMPT_COMMAND: 'kept' },
        command:
          'read -r word; echo "got=$word pid=$$ cwd=$PWD pc=$PROMPT_COMMAND posix=${POSIXLY_CORRECT-unset}"; exit 7',
      })
      const ended = rest(t.stream)
      t.stream.write('hello\n')
      expect(await t.exited).toEqual({ exitCode: 7 })
      const out = await ended
      expect(out).toContain(`got=hello pid=${t.pid} cwd=/workspace/sub pc=kept posix=unset`)
      // Only the echo of the typed line and the command's output: no prompt, no startup files (but
      // bash's complaint where the image lacks the C.UTF-8 locale E2B's PTYs default to).
      const lines = out.replace(/\r/g, '').replace(/^.*warning: setlocale: .*\n/gm, '')
      expect(lines).toBe(`hello\ngot=hello pid=${t.pid} cwd=/workspace/sub pc=kept posix=unset\n`)
    },
    T,
  )

  test(
    'every byte of a flood of output arrives, in order',
    async () => {
      const sb = await fx.create()
      const t = await sb.openTerminal!({ cols: 80, rows: 24, command: 'seq 1 200000; exit 0' })
      const out = await rest(t.stream)
      expect(await t.exited).toEqual({ exitCode: 0 })
      const numbers = out
        .replace(/\r/g, '')
        .split('\n')
        .filter((l) => /^\d+$/.test(l))
      expect(numbers.length).toBe(200000)
      expect(numbers.every((n, i) => Number(n) === i + 1)).toBe(true)
    },
    T,
  )

  test(
    'an open terminal keeps its sandbox alive past the idle TTL; a sandbox killed behind its back ends it with SANDBOX_LOST',
    async () => {
      // idle TTL 3 s: E2B kills the sandbox 4 s after its last use unless the terminal refreshes it.
      const sb = await fx.create({ idleTtlMs: 3000 })
      const t = await sb.openTerminal!({ cols: 80, rows: 24 })
      const alive = until(t.stream, /alive-2/)
      t.stream.write('sleep 7; echo alive-$((1+1))\n')
      await alive
      const lost = new Promise<unknown>((resolve) => t.stream.once('error', resolve))
      const r = await fetch(`${endpoint.apiUrl}/sandboxes/${sb.ref.id}`, {
        method: 'DELETE',
        headers: { 'x-api-key': endpoint.apiKey },
      })
      expect(r.status).toBe(204)
      expect(await lost).toMatchObject({ code: 'SANDBOX_LOST' })
      expect(await t.exited).toEqual({ exitCode: null })
    },
    T,
  )

  test(
    'bad input: a size out of range, a cwd that does not exist',
    async () => {
      const sb = await fx.create()
      expect(await rejectionOf(sb.openTerminal!({ cols: 0, rows: 24 }))).toMatchObject({
        code: 'BAD_REQUEST',
        message: expect.stringMatching(/cols 0 is out of range; give an integer of 1-65535/),
      })
      expect(await rejectionOf(sb.openTerminal!({ cols: 80, rows: 24, cwd: '/no/such/dir' }))).toMatchObject({
        code: 'BAD_REQUEST',
        message: expect.stringMatching(
          /terminal cwd \/no\/such\/dir does not exist .*create it or pick another/,
        ),
      })
    },
    T,
  )
})
