/**
 * envd's `filesystem.Filesystem` RPC (unary part): `Stat`, `MakeDir`, `Move`, `Remove`, `ListDir`, each run
 * as a short helper process in the session's sandbox (busybox `stat`/`find`), answered with envd's
 * `EntryInfo` in proto3 JSON. Relative paths resolve against the sandbox's working directory, and
 * entries carry absolute paths. File operations are not commands: the tool-call policy does not see them.
 */
import { posix } from 'node:path'
import { ConnectRpcError } from './connect.js'
import { lossOf } from './output-loss.js'
import type { E2BRouteDeps } from './deps.js'
import type { E2BSandbox } from './sandboxes.js'

type Json = Record<string, unknown>

/** `stat -c` format of one entry: type, size, octal mode, permission string, owner, group, mtime, path. */
const STAT_FORMAT = '%F|%s|%a|%A|%U|%G|%Y|%n'
const NOT_FOUND = 44
const EXISTS = 17

/** Runs `script` (`$1`, `$2` … = `args`) in the sandbox to its end; returns its exit code and stdout. */
export async function runShort(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  script: string,
  args: string[],
): Promise<{ exitCode: number | null; stdout: string; stderr: string }> {
  const svc = deps.processes
  if (!svc) throw new ConnectRpcError('unimplemented', 'this server has no sandbox processes')
  const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  // With backpressure, as every E2B command: a listing longer than the output buffer is not cut.
  const info = await svc.start(s.tenant, s.sandboxId, {
    command: `set -- ${quoted}; ${script}`,
    backpressure: true,
  })
  if (!info) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
  let stdout = ''
  let stderr = ''
  let from = { stdoutOffset: 0, stderrOffset: 0 }
  try {
    await svc.writeStdin(s.tenant, s.sandboxId, info.id, new Uint8Array(), true).catch(() => undefined)
    for (;;) {
      const out = await svc.read(s.tenant, s.sandboxId, info.id, {
        ...from,
        maxBytes: 1 << 20,
        waitMs: 5_000,
      })
      if (!out) throw new ConnectRpcError('not_found', `sandbox ${s.sandboxId} is gone`)
      const loss = lossOf(out, info.pid)
      if (loss) throw loss
      stdout += out.stdout.data
      stderr += out.stderr.data
      from = { stdoutOffset: out.stdout.nextOffset, stderrOffset: out.stderr.nextOffset }
      const p = out.process
      if (p.state !== 'running' && from.stdoutOffset >= p.stdoutBytes && from.stderrOffset >= p.stderrBytes)
        return { exitCode: p.exitCode, stdout, stderr }
    }
  } finally {
    await svc.remove(s.tenant, s.sandboxId, info.id).catch(() => undefined)
  }
}

function fileType(kind: string): string {
  if (kind === 'directory') return 'FILE_TYPE_DIRECTORY'
  if (kind === 'symbolic link') return 'FILE_TYPE_SYMLINK'
  return 'FILE_TYPE_FILE'
}

/** One `STAT_FORMAT` line → envd's EntryInfo; `cwd` makes a relative path absolute. */
function entryOf(line: string, cwd: string): Json {
  const parts = line.split('|')
  const [kind = '', size = '0', mode = '0', perms = '', owner = '', group = '', mtime = '0'] = parts
  const path = posix.resolve(cwd, parts.slice(7).join('|'))
  return {
    name: posix.basename(path),
    type: fileType(kind),
    path,
    size: size,
    mode: parseInt(mode, 8),
    permissions: perms,
    owner,
    group,
    modifiedTime: new Date(Number(mtime) * 1000).toISOString(),
  }
}

function pathOf(message: Json): string {
  const path = message.path
  if (typeof path !== 'string' || !path) throw new ConnectRpcError('invalid_argument', 'path is required')
  return path
}

function failed(r: { exitCode: number | null; stderr: string }, path: string): ConnectRpcError {
  if (r.exitCode === NOT_FOUND) return new ConnectRpcError('not_found', `path '${path}' does not exist`)
  return new ConnectRpcError('internal', r.stderr.trim() || `exit code ${r.exitCode}`)
}

/** Answers one `filesystem.Filesystem/<method>` unary call. */
export async function unaryFilesystem(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  method: string,
  message: Json,
): Promise<unknown> {
  switch (method) {
    case 'Stat': {
      const path = pathOf(message)
      const r = await runShort(
        deps,
        s,
        `[ -e "$1" ] || [ -L "$1" ] || exit ${NOT_FOUND}; pwd; stat -c '${STAT_FORMAT}' -- "$1"`,
        [path],
      )
      if (r.exitCode !== 0) throw failed(r, path)
      const [cwd = '/', line = ''] = r.stdout.split('\n')
      return { entry: entryOf(line, cwd) }
    }
    case 'MakeDir': {
      const path = pathOf(message)
      const r = await runShort(
        deps,
        s,
        `[ -e "$1" ] && exit ${EXISTS}; mkdir -p -- "$1" && pwd && stat -c '${STAT_FORMAT}' -- "$1"`,
        [path],
      )
      if (r.exitCode === EXISTS) throw new ConnectRpcError('already_exists', `path '${path}' already exists`)
      if (r.exitCode !== 0) throw failed(r, path)
      const [cwd = '/', line = ''] = r.stdout.split('\n')
      return { entry: entryOf(line, cwd) }
    }
    case 'Move': {
      const source = typeof message.source === 'string' ? message.source : ''
      const destination = typeof message.destination === 'string' ? message.destination : ''
      if (!source || !destination)
        throw new ConnectRpcError('invalid_argument', 'source and destination are required')
      const r = await runShort(
        deps,
        s,
        `[ -e "$1" ] || [ -L "$1" ] || exit ${NOT_FOUND}; mv -- "$1" "$2" && pwd && stat -c '${STAT_FORMAT}' -- "$2"`,
        [source, destination],
      )
      if (r.exitCode !== 0) throw failed(r, source)
      const [cwd = '/', line = ''] = r.stdout.split('\n')
      return { entry: entryOf(line, cwd) }
    }
    case 'Remove': {
      const path = pathOf(message)
      const r = await runShort(deps, s, 'rm -rf -- "$1"', [path])
      if (r.exitCode !== 0) throw failed(r, path)
      return {}
    }
    case 'ListDir': {
      const path = pathOf(message)
      const depth = message.depth === undefined ? 1 : Number(message.depth)
      if (!Number.isInteger(depth) || depth < 1)
        throw new ConnectRpcError('invalid_argument', 'depth must be a positive integer')
      const r = await runShort(
        deps,
        s,
        `[ -d "$1" ] || exit ${NOT_FOUND}; pwd; find "$1" -mindepth 1 -maxdepth "$2" -exec stat -c '${STAT_FORMAT}' -- {} +`,
        [path, String(depth)],
      )
      if (r.exitCode !== 0) throw failed(r, path)
      const [cwd = '/', ...lines] = r.stdout.split('\n').filter(Boolean)
      const entries = lines
        .map((l) => entryOf(l, cwd))
        .sort((a, b) => String(a.path).localeCompare(String(b.path)))
      return { entries }
    }
    default:
      throw new ConnectRpcError(
        'unimplemented',
        `filesystem.Filesystem/${method} is not implemented by sandbox-router`,
      )
  }
}
