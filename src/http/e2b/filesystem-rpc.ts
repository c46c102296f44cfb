/**
 * envd's `filesystem.Filesystem` RPC (unary part): `Stat`, `MakeDir`, `Move`, `Remove`, `ListDir`, each run
 * as a short helper process in the session's sandbox (busybox `stat`/`find`), answered with envd's
 * `EntryInfo` in proto3 JSON. Relative paths resolve against the sandbox's working directory, and
 * entries carry absolute paths. File operations are not commands: the tool-call policy does not see them.
 */
import { ConnectRpcError } from './connect.js'
import type { E2BRouteDeps } from './deps.js'
import { entriesOf, INFO, STAT_FORMAT } from './entry-info.js'
import type { E2BSandbox } from './sandboxes.js'
import { runHelper as runShort } from './sandbox-helper.js'

type Json = Record<string, unknown>

const NOT_FOUND = 44
const EXISTS = 17
/** Shell: the `stat` line and the `--proc-fs-info` line of `$2` (after the working directory). */
const DESCRIBE = `pwd && stat -c '${STAT_FORMAT}' -- "$2" || exit $?; ${INFO} "$2" 2>/dev/null; exit 0`

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
      const r = await runShort(deps, s, `[ -e "$1" ] || [ -L "$1" ] || exit ${NOT_FOUND}; ${DESCRIBE}`, [
        path,
        path,
      ])
      if (r.exitCode !== 0) throw failed(r, path)
      return { entry: entriesOf(r.stdout)[0] }
    }
    case 'MakeDir': {
      const path = pathOf(message)
      const r = await runShort(
        deps,
        s,
        `[ -e "$1" ] && exit ${EXISTS}; mkdir -p -- "$1" || exit $?; ${DESCRIBE}`,
        [path, path],
      )
      if (r.exitCode === EXISTS) throw new ConnectRpcError('already_exists', `path '${path}' already exists`)
      if (r.exitCode !== 0) throw failed(r, path)
      return { entry: entriesOf(r.stdout)[0] }
    }
    case 'Move': {
      const source = typeof message.source === 'string' ? message.source : ''
      const destination = typeof message.destination === 'string' ? message.destination : ''
      if (!source || !destination)
        throw new ConnectRpcError('invalid_argument', 'source and destination are required')
      const r = await runShort(
        deps,
        s,
        `[ -e "$1" ] || [ -L "$1" ] || exit ${NOT_FOUND}; mv -- "$1" "$2" || exit $?; ${DESCRIBE}`,
        [source, destination],
      )
      if (r.exitCode !== 0) throw failed(r, source)
      return { entry: entriesOf(r.stdout)[0] }
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
        `[ -d "$1" ] || exit ${NOT_FOUND}; pwd; find "$1" -mindepth 1 -maxdepth "$2" -exec stat -c '${STAT_FORMAT}' -- {} + || exit $?; ` +
          `find "$1" -mindepth 1 -maxdepth "$2" -exec ${INFO} {} + 2>/dev/null; exit 0`,
        [path, String(depth)],
      )
      if (r.exitCode !== 0) throw failed(r, path)
      const entries = entriesOf(r.stdout).sort((a, b) => String(a.path).localeCompare(String(b.path)))
      return { entries }
    }
    default:
      throw new ConnectRpcError(
        'unimplemented',
        `filesystem.Filesystem/${method} is not implemented by sandbox-router`,
      )
  }
}
