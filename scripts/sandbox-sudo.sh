#!/bin/sh
# `sudo` in sandbox-router's images (scripts/setup.sh, scripts/build-images.sh dev). A sandbox runs
# as an unprivileged user with every capability dropped and no-new-privileges set, so no program
# inside can become root; this one says so instead of a bare "command not found". As root (a profile
# with `user: '0:0'`) it runs the command, as sudo would. docs/e2b-endpoint.md#sudo
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -E | -H | -n | -S | -k | --preserve-env | --set-home | --non-interactive | --stdin) shift ;;
    -*) break ;;
    *) break ;;
  esac
done
if [ "$(id -u)" = 0 ]; then
  [ $# -gt 0 ] || exit 0
  exec "$@"
fi
echo "sudo: not available in this sandbox: it runs as $(id -un 2>/dev/null || id -u) without privileges (capabilities dropped, no-new-privileges); sandbox-router never runs commands as root (docs/e2b-endpoint.md)" >&2
exit 1
