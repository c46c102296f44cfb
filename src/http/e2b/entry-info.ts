/**
 * envd's `EntryInfo` (proto3 JSON) from what a helper script prints: a `stat -c` line per entry,
 * then the agent's `--proc-fs-info` JSON line per entry (a symlink's absolute target, the file's
 * metadata: its `user.e2b.*` extended attributes). A sandbox whose agent predates `--proc-fs-info`
 * prints an error line instead, and its entries come without either.
 */
import { posix } from 'node:path'
import { AGENT } from './sandbox-helper.js'

type Json = Record<string, unknown>

/** `stat -c` format of one entry: type, size, octal mode, permission string, owner, group, mtime, path. */
export const STAT_FORMAT = '%F|%s|%a|%A|%U|%G|%Y|%n'

/** Shell: prints the `--proc-fs-info` line of each argument (nothing fails the script). */
export const INFO = `${AGENT} --proc-fs-info`

function fileType(kind: string): string {
  if (kind === 'directory') return 'FILE_TYPE_DIRECTORY'
  if (kind === 'symbolic link') return 'FILE_TYPE_SYMLINK'
  return 'FILE_TYPE_FILE'
}

/** What `--proc-fs-info` says of one path (as the script named it). */
interface FsInfo {
  path: string
  target?: string
  metadata?: Record<string, string>
}

/** One `STAT_FORMAT` line → envd's EntryInfo; `cwd` makes a relative path absolute. */
function entryOf(line: string, cwd: string, info: FsInfo | undefined): Json {
  const parts = line.split('|')
  const [kind = '', size = '0', mode = '0', perms = '', owner = '', group = '', mtime = '0'] = parts
  const path = posix.resolve(cwd, parts.slice(7).join('|'))
  const metadata = info?.metadata && Object.keys(info.metadata).length ? info.metadata : undefined
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
    ...(info?.target !== undefined ? { symlinkTarget: posix.resolve(posix.dirname(path), info.target) } : {}),
    ...(metadata ? { metadata } : {}),
  }
}

/**
 * The entries of a helper's output: its first line the working directory, then `stat` lines and
 * `--proc-fs-info` lines in any order (joined by the path the script named).
 */
export function entriesOf(stdout: string): Json[] {
  const [cwd = '/', ...lines] = stdout.split('\n').filter(Boolean)
  const infos = new Map<string, FsInfo>()
  const stats: string[] = []
  for (const line of lines) {
    if (!line.startsWith('{')) {
      stats.push(line)
      continue
    }
    try {
      const j = JSON.parse(line) as Partial<FsInfo>
      if (typeof j.path === 'string') infos.set(j.path, j as FsInfo)
    } catch {
      // not an info line: a name that starts with `{` is still a stat line
      stats.push(line)
    }
  }
  return stats.map((l) => entryOf(l, cwd, infos.get(l.split('|').slice(7).join('|'))))
}
