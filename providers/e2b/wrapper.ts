import { outputSplit } from '../../src/sandbox/index.js'

/**
 * The shell wrapper every command runs in. E2B starts commands as `/bin/bash -l -c <script>` and
 * its own deadline only ends the client's stream (the process keeps running, E2B#500), so the
 * wrapper enforces ours inside the sandbox:
 *
 * - the command runs in a new session (`setsid`), so its whole process group can be killed;
 * - a sleeper in its own session signals the wrapper (USR1) at the deadline, which kills the group;
 * - SIGTERM to the wrapper (our cancel) kills the group too;
 * - when the command ends, whatever it left in its group is killed.
 *
 * - stdout and stderr pass through in-sandbox readers that forward the head of the stream, keep
 *   its tail (`tail -c`) and count what lies between, so an output flood never blocks the command
 *   nor travels to the client (see src/sandbox/output-cap.ts for the split).
 *
 * It reports on stdout with tokens `\x1e<nonce><kind><digits>\n` that {@link TokenFilter} strips:
 * `x<code>` (the command's shell exited normally, from its EXIT trap), `t` (deadline reached),
 * `c` (the working directory is unusable), `o<n>` / `e<n>` (n bytes of stdout / stderr were dropped
 * between the head and the tail), `s<status>` (the wrapper's own exit status, its last
 * word: a process that escaped the group with `setsid` may still hold the pipes, so the client
 * need not wait for the stream's end). The random nonce keeps output from forging tokens.
 * POSIX sh syntax throughout: it runs under bash on E2B and under busybox sh as well.
 */

/** Token separator: ASCII record separator. */
const RS = '\x1e'

/** Single-quotes a string for POSIX sh. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`
}

/** What {@link buildWrapper} needs. */
export interface WrapperSpec {
  /** 16 hex digits, fresh for every command. */
  nonce: string
  command: string
  /** Absolute working directory. */
  cwd: string
  timeoutMs: number
  /** Per-stream cap (bytes): the sandbox sends the head and the tail of the cap, and counts the rest. */
  outputCapBytes: number
}

/** The script passed to `commands.run`. */
export function buildWrapper({ nonce, command, cwd, timeoutMs, outputCapBytes }: WrapperSpec): string {
  const token = (kind: string): string => `printf "\\036${nonce}${kind}\\n"`
  // The EXIT trap tells a normal exit from a signal death that 128+n alone cannot. With the
  // cappers in place it writes to a file: on stdout it would be dropped with output past the cap.
  const trapped = (to: string): string => `trap 'printf "\\036${nonce}x%d\\n" "$?" ${to}' EXIT; ${command}`
  const seconds = (timeoutMs / 1000).toFixed(3)
  const { head, tail } = outputSplit(outputCapBytes)
  // Named by the nonce (16 random hex digits): known here, so the trap can name it literally.
  const dir = `/tmp/.sbx-${nonce}`
  return [
    `trap 'kill -s KILL -$c -$w 2>/dev/null; [ -z "$D" ] || { kill -s KILL -$r1 -$r2; rm -rf "$D"; } 2>/dev/null; exit 143' TERM`,
    `cd ${shellQuote(cwd)} 2>/dev/null || { ${token('c')}; exit 1; }`,
    `exec 3<&0`,
    // Each stream goes through a reader that passes the head, keeps the tail and counts the rest
    // (tee into a FIFO that wc reads), so a flood neither blocks the command nor travels to the client
    // (the SDK buffers all it receives). Without a writable /tmp or mkfifo the command writes
    // straight to the pipes and the client keeps the head and the tail.
    `h=${head} k=${tail} D=${dir}`,
    `mkdir -m 700 "$D" 2>/dev/null && mkfifo "$D/o" "$D/e" "$D/o.w" "$D/e.w" 2>/dev/null || { rm -rf "$D" 2>/dev/null; D=; }`,
    // Each reader is a session of its own, so the whole of it (sh, dd, tail) can be killed at once.
    `cap='{ dd bs=65536 iflag=count_bytes count=$0 2>/dev/null || head -c $0; }; wc -c <"$2.w" >"$2.n" & tee "$2.w" | tail -c $1; wait'`,
    `if [ -n "$D" ]; then`,
    `  setsid /bin/sh -c "$cap" $h $k "$D/o" <"$D/o" & r1=$!`,
    `  setsid /bin/sh -c "$cap" $h $k "$D/e" <"$D/e" >&2 & r2=$!`,
    `  setsid /bin/bash -c ${shellQuote(trapped(`>${dir}/x`))} 0<&3 3<&- >"$D/o" 2>"$D/e" &`,
    `else`,
    `  setsid /bin/bash -c ${shellQuote(trapped(''))} 0<&3 3<&- &`,
    `fi`,
    `c=$!`,
    `exec 3<&- 0</dev/null 2>/dev/null`,
    `t=`,
    `trap 't=1; ${token('t')}; kill -s KILL -$c' USR1`,
    `setsid /bin/sh -c "sleep ${seconds}; kill -s USR1 $$" </dev/null >/dev/null 2>&1 &`,
    `w=$!`,
    `wait $c; s=$?`,
    `[ -z "$t" ] || { wait $c; s=137; }`,
    `kill -s KILL -$c -$w 2>/dev/null`,
    // A process that left the group with setsid may hold the FIFOs: stop reading a second later.
    `if [ -n "$D" ]; then`,
    `  ( sleep 1; kill -s KILL -$r1 -$r2 ) </dev/null >/dev/null 2>&1 & l=$!`,
    `  wait $r1 $r2; kill $l 2>/dev/null`,
    `  [ -r "$D/x" ] && cat "$D/x"`,
    // Bytes past the head beyond the tail were dropped: the client puts the marker there.
    `  for f in o e; do m=0; [ -r "$D/$f.n" ] && read -r m <"$D/$f.n"; m=$((\${m:-0} - k)); [ "$m" -le 0 ] || printf "\\036${nonce}$f%d\\n" "$m"; done`,
    `  rm -rf "$D"`,
    `fi`,
    `printf "\\036${nonce}s%d\\n" "$s"`,
    `exit $s`,
  ].join('\n')
}

/** What the wrapper reported. */
export interface WrapperReport {
  /** Exit code from the command shell's EXIT trap (absent when it died of a signal). */
  exit?: number
  /** The wrapper's exit status, once it is about to exit. */
  status?: number
  /** Bytes of stdout the sandbox dropped between the head and the tail. */
  droppedStdout: number
  /** Bytes of stderr the sandbox dropped between the head and the tail. */
  droppedStderr: number
  timedOut: boolean
  cwdFailed: boolean
}

/**
 * Strips the wrapper's tokens from the stdout text stream. Text that might be the start of a token
 * is held back until the next chunk decides (only a partial `\x1e<nonce>` at a chunk's end).
 */
export class TokenFilter {
  private readonly marker: string
  private held = ''
  readonly report: WrapperReport = { timedOut: false, cwdFailed: false, droppedStdout: 0, droppedStderr: 0 }

  constructor(nonce: string) {
    this.marker = RS + nonce
  }

  /** Returns the text of `chunk` that belongs to the command's output. */
  push(chunk: string): string {
    let s = this.held + chunk
    this.held = ''
    let out = ''
    for (;;) {
      const i = s.indexOf(this.marker)
      if (i < 0) {
        const keep = this.partialTail(s)
        this.held = s.slice(s.length - keep)
        return out + s.slice(0, s.length - keep)
      }
      out += s.slice(0, i)
      const rest = s.slice(i + this.marker.length)
      const m = /^([xtcsoe])(\d*)\n/.exec(rest)
      if (m) {
        this.record(m[1] ?? '', m[2] ?? '')
        s = rest.slice(m[0].length)
        continue
      }
      if (/^(?:[xtcsoe]\d{0,20})?$/.test(rest)) {
        this.held = s.slice(i)
        return out
      }
      // Not a token after all: pass the separator through and look further.
      out += RS
      s = s.slice(i + 1)
    }
  }

  /** The text still held back (at the end of the stream it is output). */
  end(): string {
    const rest = this.held
    this.held = ''
    return rest
  }

  /** Length of the longest suffix of `s` that is a proper prefix of the marker. */
  private partialTail(s: string): number {
    const from = Math.max(0, s.length - this.marker.length + 1)
    for (let i = s.indexOf(RS, from); i >= 0; i = s.indexOf(RS, i + 1)) {
      if (this.marker.startsWith(s.slice(i))) return s.length - i
    }
    return 0
  }

  private record(kind: string, digits: string): void {
    if (kind === 'x') this.report.exit = Number(digits)
    else if (kind === 's') this.report.status = Number(digits)
    else if (kind === 't') this.report.timedOut = true
    else if (kind === 'o') this.report.droppedStdout = Number(digits)
    else if (kind === 'e') this.report.droppedStderr = Number(digits)
    else this.report.cwdFailed = true
  }
}
