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
 * The in-sandbox output cap of a command (see {@link ShellLine.cap}), as shell functions.
 *
 * `__sbx_cap_open DIR HEAD TAIL` saves the shell's stdout and stderr (the transport's pipes), makes
 * FIFOs in DIR and starts one reader per stream behind them, as background jobs of the shell: each
 * copies the first HEAD bytes straight to the saved stream (`dd iflag=count_bytes`, which writes as
 * it reads, so live output flows; `stdbuf -o0 head -c` with GNU coreutils; `head -c` where dd
 * lacks the flag), keeps the last TAIL bytes of
 * the rest (`tail -c`) and counts the rest (`tee` into a FIFO that `wc -c` reads). The command's
 * group is redirected into the FIFOs (`__sbx_o`, `__sbx_e`), so it still runs in the shell itself.
 * When DIR cannot be made, the command writes straight to the streams (the client caps then).
 *
 * `__sbx_cap_close` (after the command, or from the EXIT trap) points stdout and stderr back at the
 * saved streams, waits for the readers (they end when the last writer of a FIFO closes it; the kill
 * helper ends them on a timeout or cancel: they are children of the shell), writes each kept tail
 * to its stream and sets `__sbx_drop` to ` OUT ERR`, the bytes dropped between head and tail, which
 * the end marker carries.
 */
const CAP_FUNCTIONS = [
  // `__sbx_sb`: GNU coreutils, whose dd counts a short read from a pipe as a whole block (the
  // head would come out short) but whose `head -c` writes as it reads when unbuffered.
  '__sbx_sb=; command -v stdbuf >/dev/null 2>&1 && __sbx_sb=1',
  // $1: the FIFO; $2: head bytes; $3: tail bytes. Its stdout is the stream the head goes to.
  '__sbx_rd() { if [ -n "$__sbx_sb" ]; then command stdbuf -o0 head -c "$2"; ' +
    'else command dd bs=65536 iflag=count_bytes count="$2" 2>/dev/null || command head -c "$2"; fi; ' +
    'command wc -c <"$1.w" >"$1.n" & command tee "$1.w" 2>/dev/null | command tail -c "$3" >"$1.t"; builtin wait; }',
  '__sbx_cap_open() { __sbx_cd=; __sbx_o=/dev/fd/1; __sbx_e=/dev/fd/2; __sbx_ck="$3"; ' +
    'command mkdir -m 700 -- "$1" 2>/dev/null && command mkfifo -- "$1/o" "$1/e" "$1/o.w" "$1/e.w" 2>/dev/null || ' +
    '{ command rm -rf -- "$1" 2>/dev/null; return 0; }; ' +
    'exec {__sbx_fo}>&1 {__sbx_fe}>&2; ' +
    '__sbx_rd "$1/o" "$2" "$3" <"$1/o" & __sbx_r1=$!; ' +
    '__sbx_rd "$1/e" "$2" "$3" <"$1/e" >&2 & __sbx_r2=$!; ' +
    // A kill helper given the keep file spares the readers: they end with the command's last writer.
    '[ -e /tmp/.sbx-shell-keep-$$ ] && builtin printf \' %s %s\' "$__sbx_r1" "$__sbx_r2" >>/tmp/.sbx-shell-keep-$$ 2>/dev/null; ' +
    '__sbx_cd=$1; __sbx_o=$1/o; __sbx_e=$1/e; }',
  // $1: the stream's files; $2: the fd to write its tail to. Prints the dropped count.
  '__sbx_cap_tail() { local n=0; { builtin read -r n <"$1.n"; } 2>/dev/null; [ "$n" -gt 0 ] 2>/dev/null || n=0; ' +
    '[ "$n" -gt 0 ] && command cat -- "$1.t" >&"$2" 2>/dev/null; ' +
    '__sbx_n=$(( n > __sbx_ck ? n - __sbx_ck : 0 )); }',
  '__sbx_cap_close() { [ -n "$__sbx_cd" ] || return 0; exec 1>&"$__sbx_fo" 2>&"$__sbx_fe"; ' +
    'builtin wait "$__sbx_r1" "$__sbx_r2" 2>/dev/null; ' +
    '__sbx_cap_tail "$__sbx_cd/o" 1; local o=$__sbx_n; __sbx_cap_tail "$__sbx_cd/e" 2; __sbx_drop=" $o $__sbx_n"; ' +
    'exec {__sbx_fo}>&- {__sbx_fe}>&-; command rm -rf -- "$__sbx_cd" 2>/dev/null; ' +
    '__sbx_cd=; __sbx_o=/dev/fd/1; __sbx_e=/dev/fd/2; }',
]

/**
 * Lines fed once into a new bash: the abort machinery (SIGUSR1 leaves the one-pass loop around the
 * command, returns from a function it is in, and a DEBUG trap skips what is left of the line),
 * the owner check, the end markers, and a `cd` into `cwd`.
 */
export function shellInitScript(cwd: string): string {
  return [
    'shopt -s expand_aliases; __sbx_rc=0; __sbx_same=0; __sbx_hex=; __sbx_drop=; __sbx_cd=; __sbx_o=/dev/fd/1; __sbx_e=/dev/fd/2',
    "__sbx_skip() { case $BASH_COMMAND in __sbx_*|'builtin printf'*|'builtin trap - DEBUG'*|'builtin shopt -u extdebug'*) return 0;; esac; return 1; }",
    "__sbx_abort() { builtin shopt -s extdebug; builtin trap '__sbx_skip' DEBUG; }",
    "builtin trap '__sbx_abort; break 1000 2>/dev/null; return 143 2>/dev/null' USR1",
    // $1: this shell's token; $2: 1 when a missing owner file still counts as continuous.
    '__sbx_own() { local o=; { builtin read -r o <' +
      SHELL_OWNER_FILE +
      '; } 2>/dev/null; if [ "$o" = "$1" ] || { [ -z "$o" ] && [ "$2" = 1 ]; }; then __sbx_same=1; else __sbx_same=0; fi; ' +
      `builtin printf '%s' "$1" >|${SHELL_OWNER_FILE} 2>/dev/null; }`,
    // $1: the status; $2: 1 when the shell itself is ending. `__sbx_drop`: the in-sandbox cap's counts.
    `__sbx_mark() { builtin printf '%s%s %d %d %d%s\\n' __sbx_end_ "\${__sbx_hex}o" "$1" "$__sbx_same" "$2" "$__sbx_drop"; builtin printf '%s%s\\n' __sbx_end_ "\${__sbx_hex}e" >&2; }`,
    ...CAP_FUNCTIONS,
    '__sbx_ended() { local s=$?; __sbx_cap_close; __sbx_mark "$s" 1; }',
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
  /**
   * Caps the command's output inside the sandbox: per stream, the first `head` bytes and the last
   * `tail` bytes reach the shell's output, and the end marker carries how many were dropped between
   * (see {@link ShellMark.droppedStdout}). For transports that re-read what the shell printed.
   */
  cap?: { head: number; tail: number }
}

/** The text that runs one command in the shell, ending with its markers (a newline-terminated line). */
export function shellCommandLine(line: ShellLine): string {
  const parts = [
    `__sbx_hex=${line.nonce}; __sbx_drop=`,
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
  const open = line.cap
    ? `__sbx_cap_open /tmp/.sbx-cap-${line.nonce} ${line.cap.head} ${line.cap.tail}; `
    : ''
  const into = line.cap ? ' >"$__sbx_o" 2>"$__sbx_e"' : ''
  const close = line.cap ? '__sbx_cap_close; ' : ''
  return (
    `${parts.join('; ')}; ${open}${guard}for __sbx_once in 1; do { builtin eval ${shellQuote(line.command)}\n} <${stdin}${into}; done; ` +
    '__sbx_rc=$?; else __sbx_rc=-1; fi; builtin trap - DEBUG; builtin shopt -u extdebug; ' +
    `${cleanup}${close}__sbx_mark "$__sbx_rc" 0\n`
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
  /** Bytes of stdout the in-sandbox cap dropped between head and tail (0 without one). */
  droppedStdout: number
  /** The same for stderr. */
  droppedStderr: number
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
  const m = /^ (-?\d+) ([01]) ([01])(?: (\d+) (\d+))?$/.exec(found)
  if (!m) return undefined
  return {
    status: Number(m[1]),
    continuous: m[2] === '1',
    ended: m[3] === '1',
    droppedStdout: Number(m[4] ?? 0),
    droppedStderr: Number(m[5] ?? 0),
  }
}
