/*
 * The toolbox's session routes (`/process/session…`), as Daytona's daemon serves them (read from
 * its source, `apps/daemon/pkg/session`): a session is one long-lived shell (the first of zsh /
 * bash in `/etc/shells`, else `$SHELL`, else `sh`, started in the daemon's working directory)
 * whose stdin the daemon writes each command into, wrapped in a block that
 *  - makes two FIFOs and, behind each, a background reader that copies the stream into the
 *    command's log line by line with a 3-byte prefix (`\x01\x01\x01` stdout, `\x02\x02\x02` stderr);
 *  - sets `trap cleanup EXIT HUP INT TERM` in the shell (the FIFOs' removal);
 *  - runs the command in the shell itself, `{ cmd; }`, stdin from a third FIFO kept open by a
 *    background `sleep infinity`, then appends `$?` to the command's exit-code file and waits
 *    for both readers (so a background job holding the output holds the session).
 * A sync exec polls the exit-code file every 50 ms and answers the log; an async exec answers at
 * once with the command id. Logs answer `{ output, stdout, stderr }` (demuxed). Deleting a session
 * sends SIGTERM to its process tree, then SIGKILL. Not modelled: WebSocket log follow (upgrades
 * are refused; the provider polls) and `…/input`.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import Docker from 'dockerode'
import { AppError } from '../../../src/errors.js'
import type { Sandbox as BackendSandbox } from '../../../src/sandbox/types.js'
import { readJson, sendError, sendJson } from './http-util.js'

/** Where the daemon keeps its per-session directories (inside the sandbox). */
const SESSIONS_DIR = '/tmp/.daytona/sessions'
/** The daemon's working directory, where a session shell starts. */
const WORKDIR = '/workspace'
const STDOUT_PREFIX = '\x01\x01\x01'
const STDERR_PREFIX = '\x02\x02\x02'

interface FakeCommand {
  id: string
  command: string
  exitCode?: number
  dir: string
}

interface FakeSession {
  id: string
  pid: number
  stdin: Duplex
  exited: boolean
  commands: Map<string, FakeCommand>
}

/** The shell choice of the daemon (`GetShell`), then the shell itself with /dev/null as output. */
const SESSION_SHELL = String.raw`echo $$
s=
l=$(grep '^[^#]' /etc/shells 2>/dev/null)
case "$l" in
  */usr/bin/zsh*) s=/usr/bin/zsh ;; */bin/zsh*) s=/bin/zsh ;;
  */usr/bin/bash*) s=/usr/bin/bash ;; */bin/bash*) s=/bin/bash ;;
esac
[ -n "$s" ] || s=$SHELL
[ -n "$s" ] || s=sh
exec "$s" >/dev/null 2>&1`

/** The block the daemon writes into the session shell for one command (the same steps, our words). */
function wrap(command: string, dir: string): string {
  const q = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`
  return `
{
  log=${q(`${dir}/output.log`)}
  dir=${q(dir)}
  sp="$dir/stdout.pipe"
  ep="$dir/stderr.pipe"
  ip=${q(`${dir}/input`)}
  rm -f "$sp" "$ep" "$ip" && mkfifo "$sp" "$ep" "$ip" || exit 1
  cleanup() { rm -f "$sp" "$ep" "$ip"; }
  trap 'cleanup' EXIT HUP INT TERM
  ( while IFS= read -r line || [ -n "$line" ]; do printf '\\001\\001\\001%s\\n' "$line"; done < "$sp" ) >> "$log" & r1=$!
  ( while IFS= read -r line || [ -n "$line" ]; do printf '\\002\\002\\002%s\\n' "$line"; done < "$ep" ) >> "$log" & r2=$!
  sleep infinity > "$ip" &
  { ${command}; } < "$ip" > "$sp" 2> "$ep"
  echo "$?" >> ${q(`${dir}/exit_code`)}
  wait "$r1" "$r2"
  cleanup
}
`
}

/** Splits a prefixed log into its streams; `output` is both without the prefixes. */
export function demuxLog(log: string): { output: string; stdout: string; stderr: string } {
  let stdout = ''
  let stderr = ''
  let target: 'out' | 'err' | undefined
  let i = 0
  while (i < log.length) {
    const out = log.indexOf(STDOUT_PREFIX, i)
    const err = log.indexOf(STDERR_PREFIX, i)
    const next = [out, err].filter((n) => n >= 0).sort((a, b) => a - b)[0] ?? log.length
    const text = log.slice(i, next)
    if (target === 'err') stderr += text
    else stdout += text
    if (next >= log.length) break
    target = next === out ? 'out' : 'err'
    i = next + 3
  }
  return { output: log.replaceAll(STDOUT_PREFIX, '').replaceAll(STDERR_PREFIX, ''), stdout, stderr }
}

/** The sessions of the fake's sandboxes, keyed by container. */
export class FakeSessions {
  private readonly docker = new Docker()
  private readonly byContainer = new Map<string, Map<string, FakeSession>>()

  private sessions(backend: BackendSandbox): Map<string, FakeSession> {
    let map = this.byContainer.get(backend.ref.id)
    if (!map) this.byContainer.set(backend.ref.id, (map = new Map()))
    return map
  }

  /**
   * Drops the sessions of a container whose processes were killed (a stop) or that was removed:
   * like a restarted daemon, the sandbox then has no session.
   */
  forget(containerId: string): void {
    for (const session of this.byContainer.get(containerId)?.values() ?? []) {
      session.exited = true
      session.stdin.destroy()
    }
    this.byContainer.delete(containerId)
  }

  /** Handles `/process/session…`; false when the route is not a session route. */
  async handle(
    backend: BackendSandbox,
    req: IncomingMessage,
    res: ServerResponse,
    rest: string[],
  ): Promise<boolean> {
    if (rest[0] !== 'process' || rest[1] !== 'session') return false
    const [, , sessionId, sub, commandId, leaf] = rest
    const method = req.method ?? 'GET'
    const sessions = this.sessions(backend)
    if (sessionId === undefined) {
      if (method === 'POST') return this.create(backend, req, res, sessions).then(() => true)
      if (method === 'GET') {
        sendJson(
          res,
          200,
          [...sessions.values()].map((s) => this.dto(s)),
        )
        return true
      }
      return false
    }
    const session = sessions.get(sessionId)
    if (!session) {
      sendError(res, req, 404, 'session not found')
      return true
    }
    if (sub === undefined && method === 'GET') sendJson(res, 200, this.dto(session))
    else if (sub === undefined && method === 'DELETE') await this.remove(backend, session, sessions, res)
    else if (sub === 'exec' && method === 'POST') await this.exec(backend, session, req, res)
    else if (sub === 'command' && commandId !== undefined) {
      const command = session.commands.get(commandId)
      if (!command) sendError(res, req, 404, 'command not found')
      else if (leaf === undefined && method === 'GET')
        sendJson(res, 200, await this.commandDto(backend, command))
      else if (leaf === 'logs' && method === 'GET') {
        sendJson(res, 200, demuxLog(await this.read(backend, `${command.dir}/output.log`)))
      } else return false
    } else return false
    return true
  }

  private dto(session: FakeSession): Record<string, unknown> {
    return {
      sessionId: session.id,
      commands: [...session.commands.values()].map((c) => ({
        id: c.id,
        command: c.command,
        ...(c.exitCode !== undefined ? { exitCode: c.exitCode } : {}),
      })),
    }
  }

  private async commandDto(backend: BackendSandbox, command: FakeCommand): Promise<Record<string, unknown>> {
    if (command.exitCode === undefined) {
      const code = await this.read(backend, `${command.dir}/exit_code`).catch(() => undefined)
      if (code !== undefined && /^-?\d+\n?$/.test(code)) command.exitCode = Number(code.trim())
    }
    return {
      id: command.id,
      command: command.command,
      ...(command.exitCode !== undefined ? { exitCode: command.exitCode } : {}),
    }
  }

  private async read(backend: BackendSandbox, path: string): Promise<string> {
    return Buffer.from(await backend.readFile(path)).toString('utf8')
  }

  private async create(
    backend: BackendSandbox,
    req: IncomingMessage,
    res: ServerResponse,
    sessions: Map<string, FakeSession>,
  ): Promise<void> {
    const body = (await readJson(req)) as { sessionId?: unknown } | undefined
    const id = body?.sessionId
    if (typeof id !== 'string' || id === '') {
      sendError(res, req, 400, 'invalid request body: sessionId is required')
      return
    }
    if (sessions.has(id)) {
      sendError(res, req, 409, 'session already exists')
      return
    }
    const exec = await this.docker.getContainer(backend.ref.id).exec({
      Cmd: ['/bin/sh', '-c', SESSION_SHELL],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      WorkingDir: WORKDIR,
    })
    const stdin = (await exec.start({ hijack: true, stdin: true })) as Duplex
    const pid = await new Promise<number>((resolve, reject) => {
      let seen = Buffer.alloc(0)
      const onData = (chunk: Buffer): void => {
        // Docker's multiplexed frames: 8-byte header, then the payload; the pid line comes first.
        seen = Buffer.concat([seen, chunk])
        const text = seen.length > 8 ? seen.subarray(8).toString() : ''
        const m = /^(\d+)\n/.exec(text)
        if (m) {
          stdin.off('data', onData)
          resolve(Number(m[1]))
        }
      }
      stdin.on('data', onData)
      stdin.once('error', reject)
      stdin.once('end', () => reject(new Error('the session shell did not start')))
    })
    const session: FakeSession = { id, pid, stdin, exited: false, commands: new Map() }
    stdin.on('data', () => undefined)
    stdin.on('end', () => (session.exited = true))
    stdin.on('error', () => (session.exited = true))
    sessions.set(id, session)
    await backend.writeFile(`${SESSIONS_DIR}/${id}/.keep`, '')
    res.writeHead(201).end()
  }

  private async exec(
    backend: BackendSandbox,
    session: FakeSession,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const body = ((await readJson(req)) ?? {}) as { command?: unknown; runAsync?: unknown; async?: unknown }
    if (typeof body.command !== 'string' || body.command.trim() === '') {
      sendError(res, req, 400, 'command cannot be empty')
      return
    }
    const async = body.runAsync === true || body.async === true
    const command: FakeCommand = {
      id: randomUUID(),
      command: body.command,
      dir: `${SESSIONS_DIR}/${session.id}/${randomUUID()}`,
    }
    session.commands.set(command.id, command)
    await backend.writeFile(`${command.dir}/output.log`, '')
    if (session.exited) {
      sendError(res, req, 400, 'failed to write command: session process has exited')
      return
    }
    session.stdin.write(wrap(body.command, command.dir))
    if (async) {
      sendJson(res, 202, { cmdId: command.id })
      return
    }
    for (;;) {
      const code = await this.read(backend, `${command.dir}/exit_code`).catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
        throw err
      })
      if (code !== undefined && /^-?\d+\n?$/.test(code)) {
        command.exitCode = Number(code.trim())
        const logs = demuxLog(await this.read(backend, `${command.dir}/output.log`))
        sendJson(res, 200, { cmdId: command.id, exitCode: command.exitCode, ...logs })
        return
      }
      if (session.exited) {
        command.exitCode = 1
        sendError(res, req, 400, 'session cancelled')
        return
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  private async remove(
    backend: BackendSandbox,
    session: FakeSession,
    sessions: Map<string, FakeSession>,
    res: ServerResponse,
  ): Promise<void> {
    sessions.delete(session.id)
    // SIGTERM to the tree, SIGKILL to what is left after the grace period; then the directory goes.
    const tree = `tree() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do echo "$c"; tree "$c"; done; }`
    await backend
      .exec({
        command:
          `${tree}; p=${session.pid}; a="$(tree $p) $p"; kill -TERM $a 2>/dev/null; ` +
          `i=0; while [ $i -lt 20 ] && kill -0 $p 2>/dev/null; do sleep 0.05; i=$((i+1)); done; ` +
          `a="$(tree $p) $p"; kill -KILL $a 2>/dev/null; rm -rf '${SESSIONS_DIR}/${session.id}'; true`,
        timeoutMs: 30_000,
        outputCapBytes: 4096,
      })
      .catch(() => undefined)
    session.stdin.destroy()
    res.writeHead(204).end()
  }
}
