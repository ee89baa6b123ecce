#!/usr/bin/env bash
# scripts/setup-agents.sh — installs the agent CLIs the harness tests run
# (offline, against internal/fakemodel) into one npm prefix:
#
#   $CORRAL_AGENTS_DIR/node_modules/.bin/{claude,codex,opencode}
#
# the AG-UI packages the event tests validate against
# (@ag-ui/core, @ag-ui/client: libraries, no binary), and the cloud
# backends' official SDKs that the providers' tests drive against their
# fakes (@daytonaio/sdk, e2b, @fly/sprites: libraries).
#
# CORRAL_AGENTS_DIR defaults to /opt/corral-agents. Versions are pinned
# exactly; bump them here (npm view PACKAGE version) and nowhere else.
# Idempotent: when every pinned version is installed and its binary answers
# --version, nothing is fetched. Needs node (>= 18) and npm. Under CI=true a
# failure exits non-zero; elsewhere it warns and the tests that need a
# missing CLI skip naming this script. Prints one status line on stdout.
set -uo pipefail

dir=${CORRAL_AGENTS_DIR:-/opt/corral-agents}
ci=${CI:-}

# package@version and the binary it installs, in the same order.
pkgs=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "opencode-ai@1.18.33"
  "@ag-ui/core@1.0.0"
  "@ag-ui/client@1.0.0"
  "@daytonaio/sdk@0.218.0"
  "e2b@2.51.0"
  "@fly/sprites@0.1.0"
  "@vercel/sandbox@3.5.0"
  "@blaxel/core@0.3.21"
  "@upstash/box@0.5.5"
  "railway@3.11.0"
)
# "-": a library with no binary, checked by its package.json version alone.
bins=(claude codex opencode - - - - - - - - -)

warn() { printf 'setup-agents: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  printf 'setup-agents: FAILED (%s) in %s\n' "$*" "$dir"
  if [ "$ci" = true ]; then exit 1; fi
  exit 0
}

command -v node >/dev/null 2>&1 || fail "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || fail "npm is not installed (apt-get install npm)"

# bubblewrap: codex sandboxes its commands with it when present, as on most
# developer machines; the codex tests then cover that path (the harness
# moves CODEX_HOME out of /tmp, which bwrap replaces).
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; }; } ||
      fail "apt-get install bubblewrap failed"
  else
    warn "bubblewrap is not installed (apt-get install bubblewrap): codex's bwrap path goes untested"
  fi
fi

# installed_version PKG prints the version npm installed under $dir, or
# nothing.
installed_version() {
  local pj="$dir/node_modules/$1/package.json"
  [ -f "$pj" ] || return 0
  node -e 'try{process.stdout.write(require(process.argv[1]).version||"")}catch(e){}' "$pj"
}

# up_to_date reports whether every pinned package is installed at its
# version and its binary runs.
up_to_date() {
  local i spec name want
  for i in "${!pkgs[@]}"; do
    spec=${pkgs[$i]}
    name=${spec%@*}
    want=${spec##*@}
    [ "$(installed_version "$name")" = "$want" ] || return 1
    [ "${bins[$i]}" = - ] && continue
    "$dir/node_modules/.bin/${bins[$i]}" --version >/dev/null 2>&1 || return 1
  done
  # The libraries the tests load with require must load: an install can
  # leave a package's version in place and files of it missing (seen: zod,
  # under @ag-ui/core, without half its locale modules).
  (cd "$dir" && node -e 'for (const p of process.argv.slice(1)) require(p)' @ag-ui/core @ag-ui/client) >/dev/null 2>&1 || return 2
  return 0
}

up_to_date
state=$?
if [ "$state" = 2 ]; then
  # Every version is in place but a library does not load: npm would keep
  # the broken files, so the whole tree is installed again.
  warn "a library in $dir/node_modules does not load: installing the tree again"
  rm -rf "$dir/node_modules" "$dir/package-lock.json"
fi
if [ "$state" != 0 ]; then
  mkdir -p "$dir" || fail "cannot create $dir (set CORRAL_AGENTS_DIR to a writable directory)"
  # A package.json of our own keeps npm from walking up to a parent's.
  [ -f "$dir/package.json" ] || printf '{"name":"corral-agents","private":true}\n' >"$dir/package.json"
  log=$(mktemp)
  # --include=optional: the CLIs ship their native binaries as optional
  # per-platform packages. --ignore-scripts is not used: some postinstall
  # steps link those binaries.
  if ! npm install --prefix "$dir" --no-audit --no-fund --include=optional --save-exact "${pkgs[@]}" >"$log" 2>&1; then
    tail -20 "$log" >&2
    rm -f "$log"
    fail "npm install failed"
  fi
  rm -f "$log"
fi

status=()
for i in "${!pkgs[@]}"; do
  b=${bins[$i]}
  if [ "$b" = - ]; then
    spec=${pkgs[$i]}
    v=$(installed_version "${spec%@*}")
    [ "$v" = "${spec##*@}" ] || fail "${spec%@*} is not installed at ${spec##*@} in $dir"
    status+=("${spec%@*} $v")
    continue
  fi
  if v=$("$dir/node_modules/.bin/$b" --version 2>/dev/null | head -1) && [ -n "$v" ]; then
    status+=("$b $v")
  else
    fail "$dir/node_modules/.bin/$b --version does not run"
  fi
done
printf 'setup-agents: ok in %s: %s\n' "$dir" "$(IFS=,; echo "${status[*]}" | sed 's/,/, /g')"
bash "$(dirname "$0")/../provider/cloudflare/bridge/install.sh" # the Cloudflare bridge Worker's npm dependencies and node 22 for wrangler
