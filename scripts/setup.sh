#!/usr/bin/env bash
# One idempotent setup step for the Docker provider:
#   1. installs docker.io, busybox-static, bash-static and a C toolchain where absent (Debian, as root);
#   2. starts dockerd in the background when `docker info` fails, and waits until it answers, then
#      registers gVisor's runtime runsc with it (scripts/setup-gvisor.sh: SIGHUP, no restart);
#   3. compiles the in-sandbox agent (providers/docker/agent) when the binary is missing or stale;
#   4. builds the base image (busybox + bash + agent, user `sandbox` uid 1000, and E2B's `user`
#      uid 1001 for the built-in `e2b` profile, a `sudo` that explains why there is none) with
#      `docker import`, only when its inputs changed (their hash is stored as an image label);
#   5. with --dev (or SBX_SETUP_DEV=1): also the dev image sandbox-router/dev (scripts/build-images.sh
#      dev: Debian packages, about 80 s the first time on a 2-core machine, cached by its inputs after).
#      `sbx setup` / `sbx image build` pass --dev when a configured profile uses the dev image.
# Environment: SBX_BASE_IMAGE (default sandbox-router/base:latest), SBX_DOCKERD_LOG
# (default /var/log/sbx-dockerd.log), SBX_DOCKERD_WAIT_S (default 60).
set -euo pipefail

build_dev=${SBX_SETUP_DEV:-}
for arg in "$@"; do
  case "$arg" in
    --dev) build_dev=1 ;;
    *) printf 'setup: error: unknown option %s (usage: setup.sh [--dev])\n' "$arg" >&2; exit 2 ;;
  esac
done
[ "$build_dev" != 0 ] || build_dev=

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${SBX_BASE_IMAGE:-sandbox-router/base:latest}
DOCKERD_LOG=${SBX_DOCKERD_LOG:-/var/log/sbx-dockerd.log}
DOCKERD_WAIT_S=${SBX_DOCKERD_WAIT_S:-60}
AGENT_DIR=$ROOT/providers/docker/agent
STATE_DIR=$ROOT/.sbx
AGENT_BIN=$STATE_DIR/sbx-agent
INPUTS_LABEL=sandbox-router.inputs

log() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

# ---- 1. packages ----------------------------------------------------------------------------
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
# Some machines ship only the docker client: the engine (dockerd) is what we need.
{ command -v docker >/dev/null 2>&1 && command -v dockerd >/dev/null 2>&1; } || missing+=(docker.io)
if command -v dpkg-query >/dev/null 2>&1; then
  deb_installed busybox-static || missing+=(busybox-static)
  deb_installed bash-static || missing+=(bash-static)
else
  [ -x /bin/busybox ] || missing+=(busybox-static)
  [ -x /bin/bash-static ] || missing+=(bash-static)
fi
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ "$(gcc -print-file-name=libc.a 2>/dev/null || echo libc.a)" != libc.a ] || missing+=(libc6-dev)

if [ ${#missing[@]} -gt 0 ]; then
  if is_root && command -v apt-get >/dev/null 2>&1; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    die "missing packages: ${missing[*]}. Install them as root: apt-get update && apt-get install -y ${missing[*]}"
  fi
fi
log "packages ok"

# ---- 2. docker engine -----------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  if [ -n "${DOCKER_HOST:-}" ]; then
    die "the engine at DOCKER_HOST=$DOCKER_HOST does not answer; start it or unset DOCKER_HOST"
  fi
  if ! is_root; then
    [ -S /var/run/docker.sock ] &&
      die "the Docker engine at /var/run/docker.sock does not answer (permission denied?); run as root or join the docker group"
    die "the Docker engine is not running; run this script as root to start it (or start dockerd yourself)"
  fi
  command -v dockerd >/dev/null 2>&1 || die "dockerd not found; install docker.io"
  log "starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  deadline=$((SECONDS + DOCKERD_WAIT_S))
  until docker info >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 20 "$DOCKERD_LOG" >&2 || true
      die "dockerd did not answer within ${DOCKERD_WAIT_S}s; see $DOCKERD_LOG"
    fi
    sleep 0.2
  done
fi
log "docker engine ok ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"

# ---- 2b. gVisor -----------------------------------------------------------------------------
# The engine runtime `runsc` for profiles with `runtime: runsc` (SBX_GVISOR=0 skips it).
"$ROOT/scripts/setup-gvisor.sh"

# ---- 3. agent -------------------------------------------------------------------------------
mkdir -p "$STATE_DIR"
# Its sources: the main loop (sbx-agent.c, which #includes the process supervisor procs.c and the
# E2B file helpers fsops.c), streams
# to ports and terminals (ports.c), their headers.
AGENT_SOURCES=("$AGENT_DIR/sbx-agent.c" "$AGENT_DIR/ports.c" "$AGENT_DIR/procs.c" "$AGENT_DIR/fsops.c" "$AGENT_DIR/forward.c" "$AGENT_DIR/direct.c" "$AGENT_DIR/agent.h" "$AGENT_DIR/ports.h" "$AGENT_DIR/protocol.h")
stale=0
[ -x "$AGENT_BIN" ] || stale=1
for src in "${AGENT_SOURCES[@]}"; do [ "$src" -nt "$AGENT_BIN" ] && stale=1; done
if [ "$stale" = 1 ]; then
  log "compiling sbx-agent"
  gcc -static -O2 -Wall -o "$AGENT_BIN.tmp" "$AGENT_DIR/sbx-agent.c" "$AGENT_DIR/ports.c"
  mv "$AGENT_BIN.tmp" "$AGENT_BIN"
fi
log "agent ok ($AGENT_BIN)"

# ---- 4. base image --------------------------------------------------------------------------
BUSYBOX=/bin/busybox
BASH_STATIC=/bin/bash-static
inputs=$(cat "$AGENT_BIN" "${AGENT_SOURCES[@]}" "$BUSYBOX" "$BASH_STATIC" "${BASH_SOURCE[0]}" "$ROOT/scripts/sandbox-sudo.sh" | sha256sum | cut -c1-16)
current=$(docker image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" "$IMAGE" 2>/dev/null || true)
# ---- 5. dev image (when asked) --------------------------------------------------------------
dev_image() {
  [ -n "$build_dev" ] || return 0
  local started=$SECONDS
  bash "$ROOT/scripts/build-images.sh" dev || die "building the dev image failed (see above); rerun: bash scripts/build-images.sh dev"
  log "dev image ok in $((SECONDS - started)) s"
}

if [ "$current" = "$inputs" ]; then
  log "image $IMAGE up to date ($inputs)"
  dev_image
  exit 0
fi

log "building $IMAGE ($inputs)"
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,root,workspace,tmp,proc,sys,dev}
cp "$BUSYBOX" "$rootfs/bin/busybox"
for applet in $("$BUSYBOX" --list-full); do
  [ -e "$rootfs/$applet" ] || ln -s /bin/busybox "$rootfs/$applet"
done
rm -f "$rootfs/bin/bash"
cp "$BASH_STATIC" "$rootfs/bin/bash"
cp "$AGENT_BIN" "$rootfs/usr/local/bin/sbx-agent"
cp "$ROOT/scripts/sandbox-sudo.sh" "$rootfs/usr/local/bin/sudo"
chmod 0755 "$rootfs/usr/local/bin/sudo"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/bash
user:x:1001:1001:user:/home/user:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
sandbox:x:1000:
user:x:1001:
nogroup:x:65534:
EOF
chmod 0755 "$rootfs" "$rootfs/workspace"
chmod 1777 "$rootfs/tmp"
owner_opts=(--owner=0 --group=0)
if is_root; then
  chown -R 0:0 "$rootfs"
  chown 1000:1000 "$rootfs/workspace"
  owner_opts=()
fi
old_id=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
tar --numeric-owner "${owner_opts[@]}" -C "$rootfs" -cf - . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'ENV HOME=/workspace' \
  --change 'WORKDIR /workspace' \
  --change 'USER 1000:1000' \
  --change "LABEL $INPUTS_LABEL=$inputs" \
  --change 'CMD ["/usr/local/bin/sbx-agent", "--init"]' \
  - "$IMAGE" >/dev/null
# The previous build is now untagged; drop it unless a container still uses it.
[ -z "$old_id" ] || docker rmi "$old_id" >/dev/null 2>&1 || true
log "image $IMAGE built"
dev_image
