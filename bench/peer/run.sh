#!/usr/bin/env bash
# bench/peer/run.sh — corral beside its closest peer, Rivet's sandbox-agent
# (issue 21), on this machine, against the same scripted model
# (internal/fakemodel), alternating run by run, and prints the table of
# medians.
#
#   bash bench/peer/run.sh            # 10 runs per case
#   PEER_RUNS=3 bash bench/peer/run.sh
#   PEER_CASES=plain,kill bash bench/peer/run.sh   # some cases only
#
# It installs the peer from the npm registry into a cache directory
# (PEER_NPM_DIR, default bench/peer/.npm, not committed): sandbox-agent's
# SDK and its server (the Rust binary in @sandbox-agent/cli-linux-x64), and
# the ACP adapters it drives Claude Code and Codex through. The server
# would fetch those adapters itself from the ACP registry; here they are
# installed up front and found on its PATH, so the run is offline apart
# from npm. The agent CLIs both sides run (claude, codex) come from
# scripts/setup-agents.sh. Then it builds corral and runs the benchmark,
# a test behind the build tag peerbench (bench/peer/*_test.go). About two
# minutes here. Needs go, node >= 18, npm; Linux x64.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${PEER_NPM_DIR:-$root/bench/peer/.npm}

# package@version, pinned; bump here.
pkgs=(
  "sandbox-agent@0.4.2"
  "@sandbox-agent/cli@0.4.2"
  # 0.20.0, the version sandbox-agent 0.4.2 falls back to, starts Claude
  # Code with an empty environment (no key, no base URL; as root it then
  # refuses to start); 0.23.1, what the ACP registry serves, passes it on.
  "@zed-industries/claude-agent-acp@0.23.1"
  "@zed-industries/codex-acp@0.16.0"
)

installed() { # installed PKG prints the version under $cache, or nothing
  local pj="$cache/node_modules/$1/package.json"
  [ -f "$pj" ] && node -e 'process.stdout.write(require(process.argv[1]).version||"")' "$pj"
  return 0
}

need=0
for spec in "${pkgs[@]}"; do
  [ "$(installed "${spec%@*}")" = "${spec##*@}" ] || need=1
done
if [ "$need" = 1 ]; then
  mkdir -p "$cache"
  [ -f "$cache/package.json" ] || printf '{"name":"corral-peer-bench","private":true}\n' >"$cache/package.json"
  echo "peer: npm install ${pkgs[*]} into $cache" >&2
  npm install --prefix "$cache" --no-audit --no-fund --include=optional --save-exact "${pkgs[@]}" >&2
fi
# npm may skip the platform package's postinstall (chmod +x).
chmod +x "$cache/node_modules/@sandbox-agent/cli-linux-x64/bin/sandbox-agent" 2>/dev/null || true

bash "$root/scripts/setup-agents.sh" >&2

cd "$root"
go build -o "$cache/corral" ./cmd/corral
out="$cache/table.md"
rm -f "$out"
log="$cache/bench.log"
echo "peer: running (log: $log)" >&2
if ! CORRAL_BIN="$cache/corral" PEER_NPM_DIR="$cache" PEER_TABLE_OUT="$out" \
  go test -tags peerbench -run '^TestPeerTable$' -v -count=1 -timeout 30m ./bench/peer/ >"$log" 2>&1; then
  tail -40 "$log" >&2
  echo "peer: FAILED" >&2
  exit 1
fi
echo "corral $(git -C "$root" rev-parse --short HEAD), sandbox-agent $(installed sandbox-agent), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
# How the host's cgroup v2 hierarchy is mounted (favordynmods changes what
# a cgroup move costs after a quiet spell; see README.md, the local
# provider).
cg=$(awk '$3 == "cgroup2" { print $2 " (" $4 ")"; exit }' /proc/self/mounts)
echo "cgroup v2: ${cg:-none}"
cat "$out"
