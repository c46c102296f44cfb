#!/usr/bin/env bash
# What only the tests need, beside scripts/setup.sh (which `npm start` runs too): Debian's headless
# Chromium, for the tests that render the service's own pages (/docs, the queue dashboard) offline.
# Also the MCP conformance suite's own package (it needs Node 22). Idempotent; installs as root where absent. Environment: SBX_CHROMIUM (default /usr/bin/chromium).
set -euo pipefail

CHROMIUM=${SBX_CHROMIUM:-/usr/bin/chromium}
log() { printf 'setup-test-tools: %s\n' "$*"; }
die() { printf 'setup-test-tools: error: %s\n' "$*" >&2; exit 1; }

if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing chromium (Debian's package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
  else
    die "$CHROMIUM not found; install it as root (apt-get install -y chromium) or set SBX_CHROMIUM"
  fi
fi
log "chromium ok ($("$CHROMIUM" --version 2>/dev/null || echo '?'))"

# The MCP conformance suite and the Node 22 it needs, in their own package (test/tools/mcp-conformance),
# so that Node 22 never shadows the project's Node: installed from its lockfile when absent or stale.
CONFORMANCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/test/tools/mcp-conformance
if [ -f "$CONFORMANCE/package-lock.json" ]; then
  if [ ! -d "$CONFORMANCE/node_modules" ] || [ "$CONFORMANCE/package-lock.json" -nt "$CONFORMANCE/node_modules" ]; then
    log "installing the MCP conformance suite (test/tools/mcp-conformance)"
    npm ci --prefix "$CONFORMANCE" --no-audit --no-fund >/dev/null
    touch "$CONFORMANCE/node_modules"
  fi
  log "mcp conformance suite ok"
fi
