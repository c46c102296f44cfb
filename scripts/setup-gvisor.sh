#!/usr/bin/env bash
# Gives the running Docker engine gVisor's runtime `runsc`, for profiles with `runtime: runsc`.
# Idempotent; called by scripts/setup.sh once dockerd answers. What it does:
#   1. installs Debian's package `runsc` where /usr/bin/runsc is absent (as root);
#   2. adds "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}
#      to the "runtimes" of the engine's daemon.json (other keys are kept; a backup is written first);
#   3. reloads dockerd with SIGHUP, which re-reads `runtimes` without a restart: running containers
#      are not touched. Then checks that `docker info` lists runsc.
# `--network=none`: gVisor's own network stack refuses to start in this engine's network namespaces
# ("cannot run with network enabled in root network namespace"), so runsc sandboxes get loopback
# only, matching profiles' default `network: none` (a runsc profile with `network: bridge` is refused).
# `--host-uds=open`: a sandbox may connect to a host Unix socket bind-mounted into it (gVisor refuses
# by default); the egress proxy's per-sandbox socket is the only one the provider mounts
# (docs/egress.md). A registration without it (an older setup) is updated the same way.
# Environment: SBX_GVISOR=0 skips this step; SBX_DOCKERD_CONFIG (default /etc/docker/daemon.json).
# Nothing to do (exit 0) when the engine already lists runsc. Not root, or an engine this script did
# not start on this machine (DOCKER_HOST elsewhere): prints what to do instead and exits 0, so the
# rest of setup goes on (only runsc profiles then fail, naming this script).
set -euo pipefail

CONFIG=${SBX_DOCKERD_CONFIG:-/etc/docker/daemon.json}
RUNSC=/usr/bin/runsc
log() { printf 'setup-gvisor: %s\n' "$*"; }
skip() { printf 'setup-gvisor: skipped: %s\n' "$*" >&2; exit 0; }

[ "${SBX_GVISOR:-1}" != 0 ] || { log "SBX_GVISOR=0: skipped"; exit 0; }
has_runsc_uds() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc":{[^}]*--host-uds=open'; }
if has_runsc_uds; then
  log "engine runtime runsc ok"
  exit 0
fi
[ "$(id -u)" = 0 ] || skip "not root; as root run $0 (or: apt-get install runsc, add runsc to $CONFIG runtimes, kill -HUP dockerd)"
[ -z "${DOCKER_HOST:-}" ] || skip "DOCKER_HOST=$DOCKER_HOST is another machine's engine; register runsc there"

# ---- 1. package -----------------------------------------------------------------------------
if [ ! -x "$RUNSC" ]; then
  command -v apt-get >/dev/null 2>&1 || skip "no apt-get; install gVisor's runsc at $RUNSC yourself"
  log "installing runsc (gVisor)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends runsc >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends runsc >/dev/null; } ||
    skip "apt-get install runsc failed; install Debian's package runsc, then run $0 again"
fi
log "runsc $("$RUNSC" --version 2>/dev/null | head -n 1 | sed 's/^runsc version //')"

# ---- 2. daemon.json -------------------------------------------------------------------------
mkdir -p "$(dirname "$CONFIG")"
[ ! -f "$CONFIG" ] || cp -p "$CONFIG" "$CONFIG.sbx-backup"
# node (which the service needs anyway) merges the entry into whatever the file holds.
node - "$CONFIG" "$RUNSC" <<'JS' || skip "could not update $CONFIG (not JSON?); add runsc to its runtimes yourself"
const fs = require('node:fs')
const [file, path] = process.argv.slice(2)
const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : ''
const config = text ? JSON.parse(text) : {}
config.runtimes = { ...(config.runtimes ?? {}), runsc: { path, runtimeArgs: ['--network=none', '--host-uds=open'] } }
fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(config, null, 2)}\n`)
fs.renameSync(`${file}.tmp`, file)
JS
log "registered runsc in $CONFIG"

# ---- 3. reload ------------------------------------------------------------------------------
pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd 2>/dev/null | cut -d' ' -f1 || true)
[ -n "$pid" ] || skip "no dockerd pid found; reload the engine yourself (kill -HUP <dockerd pid>)"
log "reloading dockerd ($pid) with SIGHUP (running containers are not touched)"
kill -HUP "$pid"
for _ in $(seq 1 50); do
  if has_runsc_uds; then
    log "engine runtime runsc ok"
    exit 0
  fi
  sleep 0.1
done
skip "dockerd did not list runsc after SIGHUP (started with --config-file or --add-runtime?); see its log"
