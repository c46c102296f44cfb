#!/usr/bin/env bash
# Runs E2B's own JS-SDK tests (a checkout of e2b-dev/E2B, packages/js-sdk/tests) against sandbox-router's
# E2B-compatible endpoint. Nothing of theirs is kept in this repository: the tests are copied into a
# temporary directory, their `../src` imports pointed at the installed `e2b` package, and run with
# E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY aimed at a `sbx serve` started here, over HTTPS with a
# CA made for the run (docs/e2b-endpoint.md). Needs openssl. SBX_DEV_IMAGE names another dev image.
#
# --chain: E2B → us → E2B. The suite talks to an outer `sbx serve` whose `base` template is a profile
# of the E2B provider, pointed at an inner `sbx serve` (plain HTTP) whose `base` is the dev image on
# Docker: every call crosses the outer endpoint, the E2B provider and the inner endpoint.
#
# --min-pass P: exit 0 when at least P % of the tests that ran passed (CI's gate; the known failures are
# listed in docs/e2b-endpoint.md), and print the failed tests by name; without it the exit code is vitest's.
#
#   scripts/e2b-upstream-tests.sh [--chain] [--min-pass P] <path to an e2b-dev/E2B checkout> [vitest args…]
set -euo pipefail
chain=0
min_pass=
while [ $# -gt 0 ]; do
  case "$1" in
    --chain) chain=1; shift ;;
    --min-pass) min_pass=${2:?--min-pass needs a percentage, e.g. --min-pass 95}; shift 2 ;;
    *) break ;;
  esac
done
src=${1:?usage: $0 [--chain] <e2b-dev/E2B checkout> [vitest args…]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/e2b-upstream-XXXXXX)
# Which files: every test file of packages/js-sdk/tests that reaches a server, i.e. creates or looks up
# sandboxes (`sandboxTest`, `Sandbox.…(`) without mocking the API in-process (msw). Left out, and named
# in the output: runtimes/ (browsers, Cloudflare workers) and template/ (template builds: no build
# service here), and the SDK's own unit tests, which import its internal modules or answer its requests
# with msw — they never reach an endpoint, so they say nothing about this one.
if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then git_src=(git -C "$src"); elif [ -f "$src/HEAD" ]; then git_src=(git --git-dir="$src"); else git_src=(); fi
read_upstream() {
  if [ ${#git_src[@]} -gt 0 ]; then "${git_src[@]}" show "HEAD:packages/js-sdk/tests/$1"; else cat "$src/packages/js-sdk/tests/$1"; fi
}
if [ ${#git_src[@]} -gt 0 ]; then
  mapfile -t all < <("${git_src[@]}" ls-tree -r --name-only HEAD packages/js-sdk/tests | sed 's#^packages/js-sdk/tests/##')
else
  mapfile -t all < <(cd "$src/packages/js-sdk/tests" && find . -type f | sed 's#^\./##' | sort)
fi
files=()
sdk_only=()
for f in "${all[@]}"; do
  case "$f" in runtimes/* | template/*) continue ;; *.ts) ;; *) continue ;; esac
  text=$(read_upstream "$f")
  if [[ "$f" != *.test.ts ]]; then
    files+=("$f")
  elif grep -q -E "sandboxTest|Sandbox\.[A-Za-z]+\(" <<< "$text" && ! grep -q "from 'msw" <<< "$text"; then
    files+=("$f")
  else
    sdk_only+=("$f")
  fi
done
echo "e2b-upstream-tests: ${#sdk_only[@]} test files not run (the SDK's own unit tests: internal modules or an msw-mocked API, no server): ${sdk_only[*]}"
for f in "${files[@]}"; do
  mkdir -p "$work/tests/$(dirname "$f")"
  read_upstream "$f" > "$work/tests/$f"
done
# `../src…` → the installed SDK; ProcessExitError is CommandExitError in the pinned release.
find "$work/tests" -name '*.ts' -exec sed -i -E \
  -e "s#from '(\.\./)+src[^']*'#from 'e2b'#" \
  -e 's/\bProcessExitError\b/CommandExitError/g' {} +
ln -s "$root/node_modules" "$work/node_modules"
cat > "$work/vitest.config.mts" <<'CFG'
import { defineConfig } from 'vitest/config'
export default defineConfig({ test: { include: ['tests/**/*.test.ts'], testTimeout: 60_000, hookTimeout: 60_000, fileParallelism: false } })
CFG
scope="e2bup-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
key="sbx_e2bup_$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -p "$work/srv"
# getHost(port) is `<port>-<sandboxId>.<domain>` and the suite fetches it over https: the endpoint
# serves TLS with a certificate for *.e2b.localhost (and 127.0.0.1, the API URL) signed by a CA made
# here (NODE_EXTRA_CA_CERTS), its domain is e2b.localhost:<port>, and since Node's resolver does not
# map *.localhost to loopback as RFC 6761 (and curl, browsers, systemd-resolved) do, the test
# processes preload a lookup that does.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=e2b-upstream test CA" \
  -keyout "$work/srv/ca.key" -out "$work/srv/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=e2b.localhost" \
  -keyout "$work/srv/tls.key" -out "$work/srv/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:*.e2b.localhost,DNS:e2b.localhost,DNS:localhost,IP:127.0.0.1\n' > "$work/srv/san.ext"
openssl x509 -req -in "$work/srv/tls.csr" -CA "$work/srv/ca.crt" -CAkey "$work/srv/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/srv/san.ext" -out "$work/srv/tls.crt" 2>/dev/null
cat > "$work/localhost-dns.cjs" <<'JS'
const dns = require('node:dns')
const lookup = dns.lookup
dns.lookup = function (host, options, callback) {
  if (typeof host !== 'string' || !/\.localhost\.?$/i.test(host)) return lookup.apply(this, arguments)
  const cb = typeof options === 'function' ? options : callback
  const all = typeof options === 'object' && options !== null && options.all
  process.nextTick(() => (all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)))
  return {}
}
JS
# E2B's base template has python3 and node: the dev image (scripts/setup.sh --dev) as E2B's user `user`
# (uid 1001 in our images) with its home.
dev_profile='{ "provider": "docker", "image": "'"${SBX_DEV_IMAGE:-sandbox-router/dev:latest}"'", "cwd": "/home/user",
               "env": { "HOME": "/home/user" }, "user": "1001:1001", "memoryMb": 1024, "pidsLimit": 512 }'
# Output of E2B commands is not back-pressured (docs/e2b-endpoint.md): room for the suite's outputs.
quotas='{ "requestsPerSecond": 1000, "processOutputBytes": 67108864 }'
srvs=()
cleanup() {
  for pid in "${srvs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${srvs[@]}"; do wait "$pid" 2>/dev/null || true; done
  ids=$(docker ps -aq --filter "label=sandbox-router.scope=$scope")
  [ -z "$ids" ] || docker rm -f $ids > /dev/null
}
trap cleanup EXIT
wait_ready() {
  for _ in $(seq 1 240); do grep -q 'listening on' "$1" && return 0; sleep 0.5; done
  cat "$1"
  exit 1
}
if [ "$chain" = 1 ]; then
  # The inner endpoint: E2B as the outer one's E2B provider sees it (Docker behind it).
  inner_port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
  inner_key="sbx_e2binner_$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  mkdir -p "$work/inner"
  cat > "$work/inner/sandbox-router.config.json" <<CFG
{ "queue": { "prefix": "$scope" }, "quotas": $quotas,
  "profiles": { "e2b-dev": $dev_profile },
  "e2b": { "templates": { "base": "e2b-dev" } } }
CFG
  (cd "$work/inner" && SBX_API_KEY=$inner_key exec node "$root/bin/sbx.js" serve --host 127.0.0.1 --port "$inner_port") > "$work/inner.log" 2>&1 &
  srvs+=($!)
  wait_ready "$work/inner.log"
  inner="http://127.0.0.1:$inner_port"
  # The outer `base`: a profile of the E2B provider (template `base` of the inner endpoint), in the
  # user's home as E2B's base is. Its sandboxes' processes are the provider's (the uploaded agent).
  base_profile='{ "provider": "e2b", "template": "base", "cwd": "/home/user", "env": { "HOME": "/home/user" } }'
  outer_env=(E2B_API_KEY="$inner_key" E2B_API_URL="$inner" E2B_SANDBOX_URL="$inner" SBX_E2B_PREVIEW_URL="$inner")
else
  base_profile=$dev_profile
  outer_env=()
fi
cat > "$work/srv/sandbox-router.config.json" <<CFG
{ "queue": { "prefix": "$scope" }, "quotas": $quotas,
  "server": { "tls": { "certFile": "tls.crt", "keyFile": "tls.key" } },
  "profiles": { "e2b-base": $base_profile },
  "e2b": { "templates": { "base": "e2b-base" }, "domain": "e2b.localhost:$port" } }
CFG
(cd "$work/srv" && exec env "${outer_env[@]}" SBX_API_KEY=$key node "$root/bin/sbx.js" serve --host 127.0.0.1 --port "$port") > "$work/serve.log" 2>&1 &
srvs+=($!)
wait_ready "$work/serve.log"
cd "$work"
E2B_API_URL="https://127.0.0.1:$port" E2B_SANDBOX_URL="https://127.0.0.1:$port" E2B_API_KEY=$key \
  NODE_EXTRA_CA_CERTS="$work/srv/ca.crt" NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require $work/localhost-dns.cjs" \
  npx vitest run --config vitest.config.mts --reporter=default --reporter=json \
  --outputFile.json="$work/results.json" "$@" && status=0 || status=$?
[ -n "$min_pass" ] || exit "$status"
# The gate: the share of tests that passed, and each failed one by file and name.
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
  const min = Number(process.argv[2])
  const failed = r.testResults.flatMap((f) => f.assertionResults.filter((t) => t.status === "failed")
    .map((t) => `${f.name.replace(/^.*\/tests\//, "")}: ${t.fullName}`))
  // Skipped tests (the suite skips some itself) count neither way.
  const ran = r.numPassedTests + r.numFailedTests
  const pct = ran ? (100 * r.numPassedTests) / ran : 0
  console.log(`E2B JS-SDK suite: ${r.numPassedTests} of ${ran} passed (${pct.toFixed(1)} %), gate ${min} %` +
    (r.numPendingTests ? `; ${r.numPendingTests} skipped by the suite itself` : ""))
  for (const f of failed) console.log(`  failed: ${f}`)
  if (ran === 0 || pct < min) {
    console.error(`e2b-upstream-tests: below the gate: ${pct.toFixed(1)} % < ${min} % (see the failures above)`)
    process.exit(1)
  }
' "$work/results.json" "$min_pass"
