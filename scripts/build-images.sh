#!/usr/bin/env bash
# Builds, on this machine's Docker engine, the images docker-compose.yml runs, without pulling from
# any image registry:
#   node   sandbox-router/node:20   a Debian rootfs (mmdebstrap --variant=minbase, ca-certificates)
#                                   + the Node 20 binary of the npm package node@20 (its per-platform
#                                   package node-linux-<arch>) + npm; user `node` (uid 1000). The
#                                   Dockerfile's NODE_IMAGE build arg points at it.
#   redis  sandbox-router/redis:7   a Debian rootfs with Debian's redis-server (user `redis`, /data).
#   all    both (the default).
#   dev    sandbox-router/dev       the dev sandbox image (the built-in `dev` profile): a Debian rootfs
#                                   with python3 (venv, pip), git, nodejs, npm, build-essential, curl,
#                                   ca-certificates, jq, ripgrep, procps, less, unzip, file; user
#                                   `sandbox` (uid 1000, home /workspace) and E2B's `user` (uid 1001,
#                                   home /home/user: the built-in `e2b` profile), a `sudo` that says
#                                   why there is none (scripts/sandbox-sudo.sh). No sbx-agent inside: the
#                                   Docker provider brings its own into every container. Not part of `all`.
# Each image is rebuilt only when its inputs changed: their hash is stored as the image label
# sandbox-router.inputs (like the base image of scripts/setup.sh). The Debian packages come from this
# machine's own apt sources (/etc/apt/sources.list*), the Node and npm packages through npm's
# configured registry, so the script names no mirror or registry host.
# Needs root (mmdebstrap), apt-get to install mmdebstrap and docker-compose when absent, npm, and a
# running engine.
# Environment: SBX_NODE_IMAGE (default sandbox-router/node:20), SBX_REDIS_IMAGE
# (default sandbox-router/redis:7), SBX_DEV_IMAGE (default sandbox-router/dev:latest),
# SBX_DEBIAN_SUITE (default: this machine's codename).
# A failed build names the step that failed (`step '<name>' failed`); each step logs its duration.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NODE_IMAGE=${SBX_NODE_IMAGE:-sandbox-router/node:20}
REDIS_IMAGE=${SBX_REDIS_IMAGE:-sandbox-router/redis:7}
DEV_IMAGE=${SBX_DEV_IMAGE:-sandbox-router/dev:latest}
CACHE_DIR=$ROOT/.sbx/image-cache
INPUTS_LABEL=sandbox-router.inputs

log() { printf 'build-images: %s\n' "$*"; }
die() { printf 'build-images: error: %s\n' "$*" >&2; exit 1; }

what=${1:-all}
case "$what" in node | redis | all | dev) ;; *) die "unknown image '$what'; use node, redis, all (both) or dev" ;; esac

docker info >/dev/null 2>&1 || die "the Docker engine does not answer; run scripts/setup.sh (sbx setup) first"
[ "$(id -u)" = 0 ] || die "mmdebstrap builds the Debian rootfs as root; run this script as root"

# mmdebstrap builds the rootfs; docker-compose (Debian's 1.29) runs the stack, unless `docker compose` exists.
missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
if [ "$what" != dev ]; then
  command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
fi
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing: ${missing[*]}, and there is no apt-get to install them"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# This machine's Debian suite and apt sources (every non-empty sources file is passed as a mirror).
if [ -n "${SBX_DEBIAN_SUITE:-}" ]; then
  SUITE=$SBX_DEBIAN_SUITE
else
  SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
fi
[ -n "$SUITE" ] || die "cannot tell the Debian suite from /etc/os-release; set SBX_DEBIAN_SUITE"
SOURCES=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && grep -qE '^[[:space:]]*[^#[:space:]]' "$f" && SOURCES+=("$f")
done
[ ${#SOURCES[@]} -gt 0 ] || die "no apt sources on this machine (/etc/apt/sources.list*); mmdebstrap needs one"
sources_hash=$(cat "${SOURCES[@]}" | sha256sum | cut -c1-16)

# The code that builds an image (its function and the helpers it calls, without comments): a changed
# recipe rebuilds the image, an edited comment does not.
recipe() { declare -f "$1" debian_rootfs import_image; echo "$SUITE"; }

# The label of an image, or nothing when it is absent.
current_inputs() { docker image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" "$1" 2>/dev/null || true; }

# step <name> <command…>: runs one build step, logs its duration, and on failure ends the build
# naming the step.
step() {
  local name=$1 started=$SECONDS rc=0
  shift
  log "step $name"
  "$@" || rc=$?
  [ "$rc" = 0 ] || die "step '$name' failed (exit $rc); its output is above"
  log "step $name done in $((SECONDS - started)) s"
}

# mmdebstrap <tarball> <packages> [hooks…]: a minbase rootfs as a tarball.
debian_rootfs() {
  local out=$1 include=$2
  shift 2
  mmdebstrap --quiet --variant=minbase --include="$include" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$@" "$SUITE" "$out" "${SOURCES[@]}"
}

# docker import <tarball> as <image>, labelled with <inputs>, then drops the build it replaced.
import_image() {
  local tarball=$1 image=$2 inputs=$3
  shift 3
  local old_id
  old_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  local changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  docker import "${changes[@]}" --change "LABEL $INPUTS_LABEL=$inputs" "$tarball" "$image" >/dev/null
  [ -z "$old_id" ] || docker rmi "$old_id" >/dev/null 2>&1 || true
}

# npm_tarball <spec>: downloads (once) the package tarball of <spec> into the cache; prints its path.
npm_tarball() {
  mkdir -p "$CACHE_DIR"
  local name
  name=$(cd "$CACHE_DIR" && npm pack --silent "$1" 2>/dev/null | tail -n 1) || return 1
  [ -n "$name" ] && [ -f "$CACHE_DIR/$name" ] || return 1
  printf '%s\n' "$CACHE_DIR/$name"
}

build_node() {
  local arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64) arch=arm64 ;;
    *) die "no node@20 binary package for $(uname -m)" ;;
  esac
  # node@20 resolves to the newest 20.x; its install step would fetch node-linux-<arch> of the same
  # version, which is the package holding the binary: take that one directly.
  local version
  version=$(npm view 'node@20' version --json 2>/dev/null | tr -d '"[], ' | grep -E '^20\.' | sort -V | tail -n 1) ||
    true
  [ -n "$version" ] || die "cannot resolve node@20 through npm (npm view node@20 version); is the npm registry reachable?"
  local node_tgz npm_tgz
  node_tgz=$(npm_tarball "node-linux-$arch@$version") || die "npm pack node-linux-$arch@$version failed"
  npm_tgz=$(npm_tarball 'npm@10') || die "npm pack npm@10 failed"
  # The certificate authorities this machine added locally (/usr/local/share/ca-certificates, e.g. a
  # TLS-inspecting egress proxy's): the image trusts what this machine trusts, so `npm ci` in the
  # service image's build and the service's own HTTPS calls work from here.
  local local_cas=()
  for f in /usr/local/share/ca-certificates/*.crt; do [ -f "$f" ] && local_cas+=("$f"); done
  local inputs
  inputs=$({ recipe build_node; cat "$node_tgz" "$npm_tgz" ${local_cas[@]+"${local_cas[@]}"}; } | sha256sum | cut -c1-12)-$sources_hash
  if [ "$(current_inputs "$NODE_IMAGE")" = "$inputs" ]; then
    log "image $NODE_IMAGE up to date (node $version, $inputs)"
    return
  fi
  log "building $NODE_IMAGE (node $version from node-linux-$arch, $(basename "$npm_tgz" .tgz), Debian $SUITE minbase)"
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  mkdir -p "$work/node" "$work/npm"
  tar -xzf "$node_tgz" -C "$work/node" --strip-components=1 package/bin/node
  tar -xzf "$npm_tgz" -C "$work/npm" --strip-components=1
  mkdir -p "$work/cas"
  [ ${#local_cas[@]} -eq 0 ] || cp ${local_cas[@]+"${local_cas[@]}"} "$work/cas/"
  debian_rootfs "$work/rootfs.tar" ca-certificates \
    --customize-hook="install -m 0755 '$work/node/bin/node' \"\$1/usr/local/bin/node\"" \
    --customize-hook="mkdir -p \"\$1/usr/local/lib/node_modules\" && cp -a '$work/npm' \"\$1/usr/local/lib/node_modules/npm\"" \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"' \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
    --customize-hook="cp -r '$work/cas/.' \"\$1/usr/local/share/ca-certificates/\" && chroot \"\$1\" update-ca-certificates >/dev/null 2>&1" \
    --customize-hook='chroot "$1" groupadd --gid 1000 node' \
    --customize-hook='chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
  import_image "$work/rootfs.tar" "$NODE_IMAGE" "$inputs" \
    'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
    "ENV NODE_VERSION=$version" \
    'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    'CMD ["node"]'
  log "image $NODE_IMAGE built ($("$work/node/bin/node" --version), ${#local_cas[@]} local CA certificate(s))"
}

build_redis() {
  local inputs
  inputs=$(recipe build_redis | sha256sum | cut -c1-12)-$sources_hash
  if [ "$(current_inputs "$REDIS_IMAGE")" = "$inputs" ]; then
    log "image $REDIS_IMAGE up to date ($inputs)"
    return
  fi
  log "building $REDIS_IMAGE (Debian $SUITE redis-server)"
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  debian_rootfs "$work/rootfs.tar" redis-server \
    --customize-hook='mkdir -p "$1/data" && chroot "$1" chown redis:redis /data'
  import_image "$work/rootfs.tar" "$REDIS_IMAGE" "$inputs" \
    'WORKDIR /data' \
    'USER redis' \
    'EXPOSE 6379' \
    'CMD ["redis-server", "--protected-mode", "no"]'
  log "image $REDIS_IMAGE built"
}

# The packages of the dev image (Debian names; the recipe hash covers this list).
DEV_PACKAGES=python3,python-is-python3,python3-venv,python3-pip,git,nodejs,npm,build-essential,curl,ca-certificates,jq,ripgrep,procps,less,unzip,file

build_dev() {
  local inputs
  inputs=$({ recipe build_dev; echo "$DEV_PACKAGES"; cat "$ROOT/scripts/sandbox-sudo.sh"; } | sha256sum | cut -c1-12)-$sources_hash
  if [ "$(current_inputs "$DEV_IMAGE")" = "$inputs" ]; then
    log "image $DEV_IMAGE up to date ($inputs)"
    return
  fi
  log "building $DEV_IMAGE (Debian $SUITE minbase + $DEV_PACKAGES; about 80 s and 750 MB on a 2-core machine)"
  local work started=$SECONDS
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  # Home /workspace: the sandbox's writable tmpfs (the root filesystem is read-only), so git config,
  # pip --user and npm's cache work there.
  step "mmdebstrap (Debian packages from this machine's apt sources)" \
    debian_rootfs "$work/rootfs.tar" "$DEV_PACKAGES" \
    --customize-hook='mkdir -p "$1/workspace"' \
    --customize-hook='chroot "$1" groupadd --gid 1000 sandbox' \
    --customize-hook='chroot "$1" useradd --uid 1000 --gid sandbox --shell /bin/bash --home-dir /workspace --no-create-home sandbox' \
    --customize-hook='chroot "$1" chown 1000:1000 /workspace' \
    --customize-hook='chroot "$1" groupadd --gid 1001 user' \
    --customize-hook='chroot "$1" useradd --uid 1001 --gid user --shell /bin/bash --home-dir /home/user --no-create-home user' \
    --customize-hook="install -m 0755 '$ROOT/scripts/sandbox-sudo.sh' \"\$1/usr/local/bin/sudo\""
  step "docker import" import_image "$work/rootfs.tar" "$DEV_IMAGE" "$inputs" \
    'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
    'ENV HOME=/workspace' \
    'ENV LANG=C.UTF-8' \
    'WORKDIR /workspace' \
    'USER 1000:1000' \
    'CMD ["/bin/bash"]'
  log "image $DEV_IMAGE built in $((SECONDS - started)) s ($(docker image inspect -f '{{.Size}}' "$DEV_IMAGE" | awk '{ printf "%d MB", $1 / 1000000 }'))"
}

case "$what" in
  dev) build_dev ;;
  node) build_node ;;
  redis) build_redis ;;
  all) build_node && build_redis ;;
esac
