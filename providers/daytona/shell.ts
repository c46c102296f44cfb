/*
 * The transport of a Daytona handle's persistent shell (src/sandbox/shell-runner.ts), on the
 * toolbox's sessions API: one session per shell, each command one async session command whose
 * logs (stdout and stderr kept apart by the daemon) are polled until both end markers show.
 *
 * The daemon's session shell is the first of zsh / bash in the image's `/etc/shells` (else
 * `$SHELL`, else `sh`), and the scheme needs bash: the session's first command therefore replaces
 * that shell with `bash --noprofile --norc` reading the daemon's own pipe (the session shell's
 * saved stdin, found in /proc), so every later session command runs in that bash. A timeout or
 * cancel runs the kill helper through `/process/execute`; the daemon's per-command output readers
 * (children of the shell whose pids each command line records) are spared. A shell that ignores
 * the kill goes with its session (`deleteSession`: SIGTERM, then SIGKILL to its process tree).
 */
import { randomBytes } from 'node:crypto'
import type { Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import {
  AppError,
  type RemoteShell,
  shellInitScript,
  shellKillScript,
  type ShellSink,
  type ShellTransport,
} from '../../src/sandbox/index.js'

/** After SIGTERM to the command's processes, SIGKILL follows this much later (ms). */
const TERM_GRACE_MS = 200
/** Delays between log polls at the start of a command (ms); then the provider's poll interval. */
const POLL_STEPS_MS = [2, 4, 8, 16, 32, 64]
/** While a command runs, whether its shell still lives is asked this often (ms). */
const PROBE_MS = 1000
/** How long a new shell may take to answer its first command (ms). */
const START_TIMEOUT_MS = 30_000

/** What the transport needs from its handle. */
export interface DaytonaShellContext {
  remote: RemoteSandbox
  sandboxId: string
  /** The profile's working directory, where a new shell starts. */
  cwd: string
  /** Timeout of one toolbox request (s). */
  requestTimeoutSec: number
  /** Log polls of a running command are this far apart once it runs a while (ms). */
  pollIntervalMs: number
  /** Maps a toolbox failure (`SANDBOX_LOST` when the sandbox is gone). */
  fail(err: unknown, what: string): Promise<AppError>
}

/** A shell of Daytona: a toolbox session. */
export interface DaytonaShellSession extends RemoteShell {
  sessionId: string
}

const PREFIX_OUT = '\x01\x01\x01'
const PREFIX_ERR = '\x02\x02\x02'

/** The two streams of a logs answer; a daemon that only sends the prefixed `output` is demuxed here. */
function streamsOf(r: { output?: string; stdout?: string; stderr?: string }): {
  stdout: string
  stderr: string
} {
  if (r.stdout || r.stderr || !r.output) return { stdout: r.stdout ?? '', stderr: r.stderr ?? '' }
  const log = r.output
  const streams = { stdout: '', stderr: '' }
  let into: 'stdout' | 'stderr' = 'stdout'
  for (let i = 0; i < log.length;) {
    const next = [log.indexOf(PREFIX_OUT, i), log.indexOf(PREFIX_ERR, i)].filter((n) => n >= 0)
    const at = next.length ? Math.min(...next) : log.length
    streams[into] += log.slice(i, at)
    if (at >= log.length) break
    into = log.startsWith(PREFIX_ERR, at) ? 'stderr' : 'stdout'
    i = at + PREFIX_OUT.length
  }
  return streams
}

/**
 * POSIX sh: become bash, reading the session's pipe (the one anonymous pipe among the shell's
 * fds). It says so on its output first: nothing more may reach the pipe before the shell has
 * gone (a shell reads ahead, and what it read would be lost with it).
 */
function bootScript(nonce: string): string {
  return (
    'if command -v bash >/dev/null 2>&1; then for f in /proc/$$/fd/*; do ' +
    `case "$(readlink "$f" 2>/dev/null)" in pipe:*) echo __sbx_boot_${nonce} exec; ` +
    'exec bash --noprofile --norc 0<"$f" >/dev/null 2>&1;; esac; ' +
    `done; fi; echo __sbx_boot_${nonce} nobash`
  )
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** The Daytona transport of {@link PersistentShellRunner}. */
export function daytonaShellTransport(ctx: DaytonaShellContext): ShellTransport<DaytonaShellSession> {
  const { remote } = ctx
  const where = `sandbox ${ctx.sandboxId}`
  const keepFile = (pid: number): string => `/tmp/.sbx-shell-keep-${pid}`

  const execAsync = async (sessionId: string, command: string): Promise<string> => {
    const r = await remote.process.executeSessionCommand(
      sessionId,
      { command, runAsync: true },
      ctx.requestTimeoutSec,
    )
    if (!r.cmdId) throw new AppError('SANDBOX_LOST', `${where}: the toolbox returned no command id`)
    return r.cmdId
  }

  /**
   * Polls a command's logs until `enough` says so; each step hands the streams' new text to
   * `onText`. With `shellPid`, every {@link PROBE_MS} it also asks whether the shell still runs
   * (the daemon tells no one when a session's shell dies); `onGone` follows a last poll.
   */
  const follow = async (
    sessionId: string,
    cmdId: string,
    onText: (stdout: string, stderr: string) => void,
    enough: () => boolean,
    liveness?: { shellPid: number; onGone: () => void },
  ): Promise<void> => {
    let seenOut = 0
    let seenErr = 0
    let probedAt = performance.now()
    const poll = async (): Promise<void> => {
      const logs = streamsOf(await remote.process.getSessionCommandLogs(sessionId, cmdId))
      const out = logs.stdout.slice(seenOut)
      const err = logs.stderr.slice(seenErr)
      seenOut = logs.stdout.length
      seenErr = logs.stderr.length
      if (out || err) onText(out, err)
    }
    for (let i = 0; !enough(); i++) {
      await sleep(POLL_STEPS_MS[i] ?? ctx.pollIntervalMs)
      if (enough()) return
      await poll()
      if (liveness && !enough() && performance.now() - probedAt >= PROBE_MS) {
        probedAt = performance.now()
        const probe = await remote.process.executeCommand(
          `kill -0 ${liveness.shellPid} 2>/dev/null && echo alive || echo gone`,
          undefined,
          undefined,
          ctx.requestTimeoutSec,
        )
        if (probe.result.includes('gone')) {
          await poll()
          if (!enough()) liveness.onGone()
          return
        }
      }
    }
  }

  return {
    sandboxId: ctx.sandboxId,
    // Every poll downloads a command's whole log: past the cap, only head and tail may reach it.
    capsInSandbox: true,
    // Records the daemon's two output readers (spared by the kill helper), and ends the `sleep` the
    // daemon leaves behind every command to hold its input FIFO open (the last job it started):
    // one per command would otherwise pile up until the sandbox's process limit.
    linePrelude:
      `builtin printf '%s %s' "\${r1-}" "\${r2-}" >|/tmp/.sbx-shell-keep-$$ 2>/dev/null; ` +
      'if [ -n "${r2-}" ] && [ "$!" != "$r2" ] && [ "$!" != "${r1-}" ]; then ' +
      'builtin disown "$!" 2>/dev/null; builtin kill -KILL "$!" 2>/dev/null; fi',
    async start(token) {
      const sessionId = `sbx-shell-${token}`
      const nonce = randomBytes(8).toString('hex')
      try {
        await remote.process.createSession(sessionId)
        const deadline = Date.now() + START_TIMEOUT_MS
        const said = async (cmdId: string, pattern: RegExp): Promise<RegExpExecArray | null> => {
          let stdout = ''
          const seen = (): boolean => pattern.test(stdout) || Date.now() > deadline
          await follow(sessionId, cmdId, (out) => (stdout += out), seen)
          return pattern.exec(stdout)
        }
        const boot = await said(
          await execAsync(sessionId, bootScript(nonce)),
          new RegExp(`__sbx_boot_${nonce} (exec|nobash)\\n`),
        )
        const init = shellInitScript(ctx.cwd).replace(/\n$/, '')
        const m =
          boot?.[1] === 'exec'
            ? await said(
                await execAsync(
                  sessionId,
                  `${init}\nprintf '%s %s %s\\n' __sbx_boot_${nonce} "$$" "\${BASH_VERSION:+bash}"`,
                ),
                new RegExp(`__sbx_boot_${nonce} (\\d+) (\\S*)\\n`),
              )
            : boot
        if (!m || m[2] !== 'bash') {
          await remote.process.deleteSession(sessionId).catch(() => undefined)
          throw new AppError(
            'CONFIG_INVALID',
            m
              ? `${where} has no bash, which persistent shells need; use a snapshot or image with bash, or run with shell: 'fresh'`
              : `${where}: the persistent shell did not start within ${START_TIMEOUT_MS} ms; run with shell: 'fresh'`,
          )
        }
        return { sessionId, pid: Number(m[1]), token, alive: true }
      } catch (err) {
        throw await ctx.fail(err, `starting the persistent shell in ${where}`)
      }
    },
    async send(shell, line, sink: ShellSink) {
      let cmdId: string
      try {
        // The daemon wraps the text as `{ text; }`: it must not end with a newline.
        cmdId = await execAsync(shell.sessionId, line.replace(/\n$/, ''))
      } catch (err) {
        shell.alive = false
        throw await ctx.fail(err, `running a command in the persistent shell of ${where}`)
      }
      const text = (out: string, err: string): void => {
        if (out) sink.stdout(out)
        if (err) sink.stderr(err)
      }
      const liveness = { shellPid: shell.pid, onGone: () => sink.shellEnded(undefined) }
      void follow(shell.sessionId, cmdId, text, () => sink.done, liveness).catch(async (err: unknown) => {
        sink.failed(
          await ctx.fail(err, `reading the output of a command in the persistent shell of ${where}`),
        )
      })
    },
    async writeStdin(path, data) {
      try {
        await remote.fs.uploadFile(Buffer.from(data), path, ctx.requestTimeoutSec)
      } catch (err) {
        throw await ctx.fail(err, `writing the stdin of a command in ${where}`)
      }
    },
    async abortCommand(shell) {
      const r = await remote.process.executeCommand(
        shellKillScript(shell.pid, TERM_GRACE_MS, keepFile(shell.pid)),
        undefined,
        undefined,
        ctx.requestTimeoutSec,
      )
      return r.result.includes('gone') ? 'gone' : 'ok'
    },
    async killShell(shell) {
      await remote.process.deleteSession(shell.sessionId)
    },
  }
}
