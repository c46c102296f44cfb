#!/usr/bin/env bash
# Builds the two images the any-image tests run, neither with the sandbox agent inside, each only
# when its recipe changed (hash in the label sandbox-router.inputs):
#   busybox  sandbox-router/test-busybox:plain  /bin/busybox and its applet links, no bash; an
#            ENTRYPOINT, CMD, WORKDIR and USER of its own that would break a naive container start.
#   debian   sandbox-router/test-debian:plain   a Debian minbase rootfs (mmdebstrap, this machine's apt
#            sources), no user with uid 1000 (so no home), ENTRYPOINT/CMD/WORKDIR/USER of its own.
# Needs root and mmdebstrap for `debian` (scripts/build-images.sh installs it).
set -euo pipefail

LABEL=sandbox-router.inputs
log() { printf 'plain-images: %s\n' "$*" >&2; }
die() { printf 'plain-images: error: %s\n' "$*" >&2; exit 1; }
current() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }

# The image's odd settings: none of these may break the agent's channel.
odd_changes=(
  --change 'ENTRYPOINT ["/bin/false"]'
  --change 'CMD ["--this-is-not-a-command"]'
  --change 'WORKDIR /srv/app'
  --change 'USER 4242:4242'
  --change 'ENV PLAIN_IMAGE=yes'
)

build_busybox() {
  local image=sandbox-router/test-busybox:plain inputs
  inputs=$({ declare -f build_busybox; printf '%s\n' "${odd_changes[@]}"; cat /bin/busybox; } | sha256sum | cut -c1-16)
  [ "$(current "$image")" = "$inputs" ] && { log "$image up to date"; return; }
  local root
  root=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$root'" RETURN
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,srv/app}
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list-full); do
    [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
  done
  rm -f "$root/bin/bash" "$root/usr/bin/bash"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  chmod 1777 "$root/tmp"
  tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . |
    docker import "${odd_changes[@]}" --change "LABEL $LABEL=$inputs" - "$image" >/dev/null
  log "$image built"
}

build_debian() {
  local image=sandbox-router/test-debian:plain inputs suite sources=()
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -qE '^[[:space:]]*[^#[:space:]]' "$f" && sources+=("$f")
  done
  inputs=$({ declare -f build_debian; printf '%s\n' "${odd_changes[@]}" "$suite"; cat "${sources[@]}"; } | sha256sum | cut -c1-16)
  [ "$(current "$image")" = "$inputs" ] && { log "$image up to date"; return; }
  command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install -y mmdebstrap (or run scripts/build-images.sh dev once)"
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  log "building $image (mmdebstrap minbase $suite)"
  mmdebstrap --quiet --variant=minbase --customize-hook='mkdir -p "$1/srv/app"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$suite" "$work/rootfs.tar" "${sources[@]}"
  docker import "${odd_changes[@]}" --change "LABEL $LABEL=$inputs" "$work/rootfs.tar" "$image" >/dev/null
  log "$image built"
}

case "${1:-}" in
  busybox) build_busybox ;;
  debian) build_debian ;;
  *) die "usage: plain-images.sh busybox|debian" ;;
esac
