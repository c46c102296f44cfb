/*
 * The bash text of a persistent shell that a remote provider drives over its own transport
 * (E2B: a long-lived process fed through stdin; Daytona: a toolbox session). The same scheme as
 * the Docker agent's FR_SHELL: each command is one line run in the shell itself (so `cd`, exports,
 * functions and aliases stay), its end is a random marker on stdout (carrying `$?`) and one on
 * stderr, and a timeout sends SIGUSR1 to the shell (which abandons the rest of the command) while
 * a helper kills the shell's descendants.
 */

/** The file each shell claims on every command; a shell that finds another's token was not the last one used. */
export const SHELL_OWNER_FILE = '/tmp/.sbx-shell-owner'

/** Single-quotes `s` for bash. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`
}

/**
 * Lines fed once into a new bash: the abort machinery (SIGUSR1 leaves the one-pass loop around the
 * command, returns from a function it is in, and a DEBUG trap skips what is left of the line),
 * the owner check, the end markers, and a `cd` into `cwd`.
 */
export function shellInitScript(cwd: string): string {
  return [
    'shopt -s expand_aliases; __sbx_rc=0; __sbx_same=0; __sbx_hex=',
    "__sbx_skip() { case $BASH_COMMAND in __sbx_*|'builtin printf'*|'builtin trap - DEBUG'*|'builtin shopt -u extdebug'*) return 0;; esac; return 1; }",
    "__sbx_abort() { builtin shopt -s extdebug; builtin trap '__sbx_skip' DEBUG; }",
    "builtin trap '__sbx_abort; break 1000 2>/dev/null; return 143 2>/dev/null' USR1",
    // $1: this shell's token; $2: 1 when a missing owner file still counts as continuous.
    '__sbx_own() { local o=; { builtin read -r o <' +
      SHELL_OWNER_FILE +
      '; } 2>/dev/null; if [ "$o" = "$1" ] || { [ -z "$o" ] && [ "$2" = 1 ]; }; then __sbx_same=1; else __sbx_same=0; fi; ' +
      `builtin printf '%s' "$1" >|${SHELL_OWNER_FILE} 2>/dev/null; }`,
    // $1: the status; $2: 1 when the shell itself is ending.
    `__sbx_mark() { builtin printf '%s%s %d %d %d\\n' __sbx_end_ "\${__sbx_hex}o" "$1" "$__sbx_same" "$2"; builtin printf '%s%s\\n' __sbx_end_ "\${__sbx_hex}e" >&2; }`,
    '__sbx_ended() { __sbx_mark "$?" 1; }',
    `builtin cd -- ${shellQuote(cwd)} 2>/dev/null`,
    '',
  ].join('\n')
}

/** One command for {@link shellCommandLine}. */
export interface ShellLine {
  /** Random hex naming this command's end markers. */
  nonce: string
  command: string
  /** A `cd` that stays, before the command; none keeps the shell's directory. */
  cwd?: string
  /** Exported into the shell (and they stay). Names must be valid shell identifiers. */
  env: Record<string, string>
  /** File the command reads as stdin; `/dev/null` when absent (the shell's own stdin is its control channel). */
  stdinPath?: string
  /** This shell's owner token. */
  token: string
  /** Whether a missing owner file counts as continuous (the handle's first shell). */
  firstShell: boolean
  /** Provider-specific text run first (builtins only; it must not print). */
  prelude?: string
}

/** The text that runs one command in the shell, ending with its markers (a newline-terminated line). */
export function shellCommandLine(line: ShellLine): string {
  const parts = [
    `__sbx_hex=${line.nonce}`,
    "builtin trap '__sbx_ended' EXIT",
    'builtin trap - DEBUG',
    'builtin shopt -u extdebug',
    `__sbx_own ${line.token} ${line.firstShell ? 1 : 0}`,
    ...(line.prelude ? [line.prelude] : []),
  ]
  for (const [key, value] of Object.entries(line.env)) parts.push(`export ${key}=${shellQuote(value)}`)
  const guard = line.cwd
    ? `if builtin cd -- ${shellQuote(line.cwd)} 2>/dev/null; then `
    : 'if builtin true; then '
  const stdin = shellQuote(line.stdinPath ?? '/dev/null')
  const cleanup = line.stdinPath ? `builtin command rm -f -- ${stdin} 2>/dev/null; ` : ''
  return (
    `${parts.join('; ')}; ${guard}for __sbx_once in 1; do { builtin eval ${shellQuote(line.command)}\n} <${stdin}; done; ` +
    '__sbx_rc=$?; else __sbx_rc=-1; fi; builtin trap - DEBUG; builtin shopt -u extdebug; ' +
    `${cleanup}__sbx_mark "$__sbx_rc" 0\n`
  )
}

/**
 * A POSIX sh script (run as a separate command in the sandbox) that aborts what the shell `pid`
 * runs: SIGUSR1 to the shell, SIGTERM to its descendants (except the direct children whose pids
 * `keepFile` lists: a provider's own output readers), and SIGKILL to those left after `graceMs`.
 * Prints `gone` when the shell no longer exists, else `ok`.
 */
export function shellKillScript(pid: number, graceMs: number, keepFile?: string): string {
  return [
    `p=${pid}`,
    'kill -0 "$p" 2>/dev/null || { echo gone; exit 0; }',
    `k=${keepFile ? `$(cat ${shellQuote(keepFile)} 2>/dev/null)` : ''}`,
    'kill -USR1 "$p" 2>/dev/null',
    // Children are printed before their own children are walked: `c` is global in sh.
    'tree() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do if [ "$1" = "$p" ]; then case " $k " in *" $c "*) continue;; esac; fi; echo "$c"; tree "$c"; done; }',
    'pids=$(tree "$p"); [ -n "$pids" ] && kill -TERM $pids 2>/dev/null',
    `sleep ${(graceMs / 1000).toFixed(3)}`,
    'pids=$(tree "$p"); [ -n "$pids" ] && kill -KILL $pids 2>/dev/null',
    'echo ok',
  ].join('\n')
}

/** What the stdout end marker carries. */
export interface ShellMark {
  /** `$?` of the command (-1: the `cd` of its cwd failed). */
  status: number
  /** Whether the owner file showed this shell as the last one used. */
  continuous: boolean
  /** Whether the shell itself ended (`exit`, `exec` failing). */
  ended: boolean
}

/** The longest suffix of `text` that is a proper prefix of `marker`. */
function heldBack(text: string, marker: string): number {
  for (let k = Math.min(text.length, marker.length - 1); k > 0; k--) {
    if (marker.startsWith(text.slice(text.length - k))) return k
  }
  return 0
}

/**
 * Finds a command's end marker in one output stream arriving in chunks: `push` returns the text
 * before it (holding back a tail that may be the marker's start); after the marker line, the rest
 * of the stream is not this command's and is dropped.
 */
export class ShellMarkerScanner {
  private buffer = ''
  /** The text after the marker on its line (stdout: status, continuity, ended), once seen. */
  found: string | undefined

  constructor(private readonly marker: string) {}

  /** The output text in `chunk` (possibly empty). */
  push(chunk: string): string {
    if (this.found !== undefined) return ''
    this.buffer += chunk
    const at = this.buffer.indexOf(this.marker)
    if (at >= 0) {
      const nl = this.buffer.indexOf('\n', at)
      const out = this.buffer.slice(0, at)
      if (nl >= 0) {
        this.found = this.buffer.slice(at + this.marker.length, nl)
        this.buffer = ''
      } else {
        this.buffer = this.buffer.slice(at)
      }
      return out
    }
    const keep = heldBack(this.buffer, this.marker)
    const out = this.buffer.slice(0, this.buffer.length - keep)
    this.buffer = this.buffer.slice(this.buffer.length - keep)
    return out
  }

  /** What is held back, when the stream ends without the marker. */
  flush(): string {
    const rest = this.found === undefined ? this.buffer : ''
    this.buffer = ''
    return rest
  }
}

/** The stdout and stderr markers of the command named `nonce`. */
export function shellMarkers(nonce: string): { stdout: string; stderr: string } {
  return { stdout: `__sbx_end_${nonce}o`, stderr: `__sbx_end_${nonce}e` }
}

/** Parses what follows the stdout marker; undefined when it is not ours. */
export function parseShellMark(found: string): ShellMark | undefined {
  const m = /^ (-?\d+) ([01]) ([01])$/.exec(found)
  if (!m) return undefined
  return { status: Number(m[1]), continuous: m[2] === '1', ended: m[3] === '1' }
}
