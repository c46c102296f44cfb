import { outputSplit } from '../../src/sandbox/index.js'

/**
 * The in-sandbox side of exec. Daytona's `/process/execute` merges stdout and stderr, keeps no
 * partial output on timeout and caps nothing, so every command runs under a small POSIX sh
 * wrapper (busybox-compatible) that:
 *
 * - starts the command with `bash -c` (else `sh -c`) in a new session (`setsid`), so the whole
 *   process group can be killed;
 * - sends stdout and stderr through FIFOs into readers (each a session of its own, so it can be
 *   killed whole and never holds the daemon's output pipe) that keep the head of the cap (`dd
 *   iflag=count_bytes`, which writes as it reads, so live polls see output at once; `head -c`, which
 *   busybox buffers, where dd lacks the flag), then its tail (`tail -c`) and count the rest (`tee`
 *   into a FIFO that `wc -c` reads), so output is capped per stream (head and tail, see
 *   src/sandbox/output-cap.ts) and a flooding process never blocks;
 * - kills the group at our timeout (TERM, then KILL 200 ms later) and keeps the partial output;
 * - after the leader exits, gives processes that still hold the pipes 500 ms, then kills the group,
 *   and stops reading 1 s later (a process that left the group with `setsid` cannot hold the result).
 *   The 500 ms also cover the readers' own end on a loaded machine: with 100 ms, a background
 *   process that had let go of the output was sometimes killed before the readers finished;
 * - prints one header line and both streams base64-encoded between random markers, byte-exact.
 *
 * Everything variable reaches the sandbox through the exec request's environment (`__SBX_*`,
 * unset before the command runs), so nothing is ever quoted into a command line. The command
 * sent to the daemon is the fixed string {@link DAEMON_COMMAND}.
 */

/** Where each run keeps its FIFOs, output files, pid and flags (removed at the end). */
export const RUN_ROOT = '/tmp/.sbx-run'

/** The one command line the daemon runs; the script itself comes in `__SBX_SCRIPT`. */
export const DAEMON_COMMAND = `sh -c 'eval "$__SBX_SCRIPT"'`

const RUN_SCRIPT = String.raw`unset __SBX_SCRIPT
D=${RUN_ROOT}/$__SBX_ID
c=$__SBX_CMD w=$__SBX_CWD t=$__SBX_TIMEOUT n=$__SBX_CAP k=$__SBX_TAIL i=$__SBX_STDIN m=$__SBX_MARK
unset __SBX_CMD __SBX_CWD __SBX_TIMEOUT __SBX_CAP __SBX_TAIL __SBX_STDIN __SBX_ID __SBX_MARK
exec 2>/dev/null
fail() { printf '%s fail %s\n' "$m" "$1"; rm -rf "$D"; exit 0; }
mkdir -p "$D" || fail mkdir
cd "$w" || fail cwd
command -v setsid >/dev/null || fail setsid
command -v base64 >/dev/null || fail base64
[ -n "$i" ] || i=/dev/null
[ -r "$i" ] || fail stdin
mkfifo "$D/o" "$D/e" "$D/out.w" "$D/err.w" || fail mkfifo
C='{ dd bs=65536 iflag=count_bytes count=$1 of="$2" || head -c $1 >"$2"; }; wc -c <"$2.w" >"$2.n" & tee "$2.w" | tail -c $3 >"$2.t"; wait'
setsid sh -c "$C" sbx $((n-k)) "$D/out" $k <"$D/o" >/dev/null &
r1=$!
setsid sh -c "$C" sbx $((n-k)) "$D/err" $k <"$D/e" >/dev/null &
r2=$!
if command -v bash >/dev/null; then s=bash; else s=sh; fi
c="trap 'echo \$? >$D/rc' EXIT; $c"
setsid sh -c 'echo $$ >"$1/pid"; [ -e "$1/cancel" ] && kill -KILL $$; exec "$2" -c "$3"' sbx "$D" "$s" "$c" >"$D/o" 2>"$D/e" <"$i" &
p=$!
(
  trap 'kill $k; exit 0' TERM
  sleep "$t" & k=$!
  wait $k
  : >"$D/timedout"
  kill -TERM -$p
  sleep 0.2
  kill -KILL -$p
) </dev/null >/dev/null &
g=$!
wait $p
x=$?
kill $g
[ -e "$D/timedout" ] && kill -KILL -$p
( sleep 0.5; kill -KILL -$p; sleep 1; kill -KILL -$r1 -$r2 ) </dev/null >/dev/null &
l=$!
wait $r1 $r2
kill $l
T=0; [ -e "$D/timedout" ] && T=1
R=-; [ -e "$D/rc" ] && read -r R <"$D/rc"
sz() { s=0; [ -e "$1" ] && s=$(wc -c <"$1"); r=0; [ -r "$1.n" ] && read -r r <"$1.n"; echo $((s + r)); }
printf '%s exit %s %s %s %s %s\n' "$m" "$x" "$R" "$T" "$(sz "$D/out")" "$(sz "$D/err")"
[ -s "$D/out" ] && cat "$D/out" "$D/out.t" | base64
printf '%s\n' "$m"
[ -s "$D/err" ] && cat "$D/err" "$D/err.t" | base64
printf '%s\n' "$m"
rm -rf "$D"
`

const POLL_SCRIPT = String.raw`unset __SBX_SCRIPT
D=${RUN_ROOT}/$__SBX_ID
a=$__SBX_OUT_OFFSET b=$__SBX_ERR_OFFSET n=$__SBX_CHUNK m=$__SBX_MARK
exec 2>/dev/null
printf '%s poll\n' "$m"
[ -e "$D/out" ] && tail -c +$((a+1)) "$D/out" | head -c "$n" | base64
printf '%s\n' "$m"
[ -e "$D/err" ] && tail -c +$((b+1)) "$D/err" | head -c "$n" | base64
printf '%s\n' "$m"
`

const CANCEL_SCRIPT = String.raw`unset __SBX_SCRIPT
D=${RUN_ROOT}/$__SBX_ID
exec 2>/dev/null
mkdir -p "$D" && : >"$D/cancel"
[ -r "$D/pid" ] && kill -KILL -$(cat "$D/pid")
exit 0
`

const MKDIR_SCRIPT = String.raw`unset __SBX_SCRIPT
d=$__SBX_DIR
unset __SBX_DIR
[ -d "$d" ] && [ -w "$d" ] && exit 0
mkdir -p -- "$d" 2>/dev/null && exit 0
command -v sudo >/dev/null && sudo -n mkdir -p -- "$d" && sudo -n chown "$(id -u):$(id -g)" -- "$d" && exit 0
echo "cannot create $d as $(id -un 2>/dev/null || id -u)" >&2
exit 1
`

const PROBE_SCRIPT = String.raw`unset __SBX_SCRIPT
f=$__SBX_PATH
unset __SBX_PATH
if [ -d "$f" ]; then echo dir; elif [ -e "$f" ]; then echo file; else echo missing; fi
`

/** One exec request to the daemon: the fixed command plus its environment. */
export interface DaemonCall {
  command: string
  env: Record<string, string>
}

/** Parameters of one wrapped command run. */
export interface RunParams {
  runId: string
  mark: string
  command: string
  cwd: string
  timeoutMs: number
  outputCapBytes: number
  /** Path of the uploaded stdin file, or undefined for none (EOF at once). */
  stdinPath?: string
  /** Request env (already merged over nothing: the profile env lives in the sandbox). */
  env: Record<string, string>
}

/** The daemon call that runs a command under the wrapper. */
export function runCall(p: RunParams): DaemonCall {
  return {
    command: DAEMON_COMMAND,
    env: {
      ...p.env,
      __SBX_SCRIPT: RUN_SCRIPT,
      __SBX_ID: p.runId,
      __SBX_CMD: p.command,
      __SBX_CWD: p.cwd,
      __SBX_TIMEOUT: (p.timeoutMs / 1000).toFixed(3),
      __SBX_CAP: String(p.outputCapBytes),
      __SBX_TAIL: String(outputSplit(p.outputCapBytes).tail),
      __SBX_STDIN: p.stdinPath ?? '',
      __SBX_MARK: p.mark,
    },
  }
}

/** The daemon call that fetches output written since the given byte offsets. */
export function pollCall(
  runId: string,
  mark: string,
  outOffset: number,
  errOffset: number,
  chunk: number,
): DaemonCall {
  return {
    command: DAEMON_COMMAND,
    env: {
      __SBX_SCRIPT: POLL_SCRIPT,
      __SBX_ID: runId,
      __SBX_OUT_OFFSET: String(outOffset),
      __SBX_ERR_OFFSET: String(errOffset),
      __SBX_CHUNK: String(chunk),
      __SBX_MARK: mark,
    },
  }
}

/** The daemon call that kills a run's process group (or stops it before it starts). */
export function cancelCall(runId: string): DaemonCall {
  return { command: DAEMON_COMMAND, env: { __SBX_SCRIPT: CANCEL_SCRIPT, __SBX_ID: runId } }
}

/** The daemon call that makes sure a directory exists and is writable (sudo -n as a fallback). */
export function mkdirCall(dir: string): DaemonCall {
  return { command: DAEMON_COMMAND, env: { __SBX_SCRIPT: MKDIR_SCRIPT, __SBX_DIR: dir } }
}

/** The daemon call that says whether a path is a `dir`, a `file` or `missing`. */
export function probeCall(path: string): DaemonCall {
  return { command: DAEMON_COMMAND, env: { __SBX_SCRIPT: PROBE_SCRIPT, __SBX_PATH: path } }
}

/** What the wrapper reported. */
export type RunReport =
  | { kind: 'fail'; step: string }
  | {
      kind: 'exit'
      /** `$?` of `wait`: the exit code, or 128 + signal. */
      waitStatus: number
      /** What the command's EXIT trap recorded, when it ran. */
      trapStatus: number | undefined
      timedOut: boolean
      /** Whole length of each stream (the command wrote this much). */
      stdoutBytes: number
      stderrBytes: number
      /** Past the cap: the head of the cap, then the tail (output-cap.ts); else the whole stream. */
      stdout: Buffer
      stderr: Buffer
    }

/** Parses the wrapper's output; undefined when it is not there (the wrapper never ran). */
export function parseRunReport(result: string, mark: string): RunReport | undefined {
  const start = result.indexOf(`${mark} `)
  if (start < 0) return undefined
  const headerEnd = result.indexOf('\n', start)
  const header = result
    .slice(start + mark.length + 1, headerEnd < 0 ? undefined : headerEnd)
    .trim()
    .split(/\s+/)
  if (header[0] === 'fail') return { kind: 'fail', step: header[1] ?? 'unknown' }
  if (header[0] !== 'exit' || headerEnd < 0) return undefined
  const [out, err] = result.slice(headerEnd + 1).split(`${mark}\n`)
  const num = (s: string | undefined): number => (s && /^-?\d+$/.test(s) ? Number(s) : NaN)
  const waitStatus = num(header[1])
  if (Number.isNaN(waitStatus) || out === undefined || err === undefined) return undefined
  const trap = num(header[2])
  return {
    kind: 'exit',
    waitStatus,
    trapStatus: Number.isNaN(trap) ? undefined : trap,
    timedOut: header[3] === '1',
    stdoutBytes: num(header[4]) || 0,
    stderrBytes: num(header[5]) || 0,
    stdout: Buffer.from(out, 'base64'),
    stderr: Buffer.from(err, 'base64'),
  }
}

/** Parses one poll's output: the new bytes of each stream, or undefined when malformed. */
export function parsePoll(result: string, mark: string): { stdout: Buffer; stderr: Buffer } | undefined {
  const start = result.indexOf(`${mark} poll\n`)
  if (start < 0) return undefined
  const [out, err] = result.slice(start + mark.length + 6).split(`${mark}\n`)
  if (out === undefined || err === undefined) return undefined
  return { stdout: Buffer.from(out, 'base64'), stderr: Buffer.from(err, 'base64') }
}
