#!/usr/bin/env bash
# scripts/setup-agent-sandbox.sh — installs sigs.k8s.io/agent-sandbox into the
# one-node cluster scripts/setup-k8s.sh started (which calls it at its end):
#   1. builds agent-sandbox-controller v$ASV from the Go module proxy through a
#      wrapper module into $CACHE/agent-sandbox-v$ASV (never committed). COST:
#      about 75 s of two cores with a cold Go build cache (~135 CPU-s), a few
#      seconds warm, nothing when the binary is there.
#   2. applies its four CRDs (Sandbox; SandboxTemplate, SandboxClaim,
#      SandboxWarmPool of the extensions group) from the module.
#   3. starts the controller with --extensions on loopback (metrics 18080,
#      probes 18081; PID in $K/agent-sandbox.pid, log in $K/logs) and waits
#      for it to be ready. A controller that answers is left alone.
# scripts/k8s-down.sh stops it with the cluster. Under CI=true a failure exits
# non-zero; elsewhere it warns and exits 0 (the Sandbox-mode tests then skip
# with the reason).
set -uo pipefail
cd "$(dirname "$0")/.."

ASV=${CORRAL_AGENT_SANDBOX_VERSION:-0.1.0}
K=${CORRAL_K8S_DIR:-/tmp/corral-k8s}
if [ "$(id -u)" = 0 ]; then
  CACHE=${CORRAL_K8S_CACHE:-/var/cache/corral-k8s}
else
  CACHE=${CORRAL_K8S_CACHE:-$HOME/.cache/corral-k8s}
fi
DIR=$CACHE/agent-sandbox-v$ASV
export KUBECONFIG=$K/admin.kubeconfig
ci=${CI:-}
t_start=$(date +%s)

warn() { printf 'setup-agent-sandbox: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  if [ "$ci" = true ]; then exit 1; fi
  exit 0
}
elapsed() { echo $(($(date +%s) - t_start))s; }
ready() { curl -fs --max-time 2 http://127.0.0.1:18081/readyz >/dev/null 2>&1; }

[ -f "$KUBECONFIG" ] || fail "no cluster kubeconfig at $KUBECONFIG (run scripts/setup-k8s.sh)"
if ready && kubectl get crd sandboxwarmpools.extensions.agents.x-k8s.io >/dev/null 2>&1; then
  exit 0
fi

# --- 1. the controller binary ------------------------------------------------
if ! [ -x "$DIR/agent-sandbox-controller" ] || [ -z "$(ls "$DIR/crds" 2>/dev/null)" ]; then
  warn "building agent-sandbox-controller v$ASV into $DIR (log $DIR/build.log)"
  mkdir -p "$DIR/wrap" "$DIR/crds"
  (
    set -e
    export CGO_ENABLED=0 GOFLAGS=-mod=mod
    cd "$DIR/wrap"
    printf 'module corral.test/asbx\n\ngo 1.26.0\n\nrequire sigs.k8s.io/agent-sandbox v%s\n' "$ASV" >go.mod
    printf '//go:build tools\n\npackage asbx\n\nimport _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"\n' >tools.go
    go mod tidy
    go build -trimpath -ldflags "-s -w" -o "$DIR/agent-sandbox-controller" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
    cp "$(go env GOMODCACHE)/sigs.k8s.io/agent-sandbox@v$ASV"/k8s/crds/*.yaml "$DIR/crds/"
    chmod 644 "$DIR"/crds/*.yaml
  ) >"$DIR/build.log" 2>&1 || { tail -20 "$DIR/build.log" >&2; fail "building agent-sandbox-controller failed (see $DIR/build.log)"; }
  warn "agent-sandbox-controller built ($(elapsed))"
fi

# --- 2. the CRDs -------------------------------------------------------------
kubectl apply -f "$DIR/crds/" >/dev/null || fail "applying the agent-sandbox CRDs failed"
for crd in sandboxes.agents.x-k8s.io sandboxtemplates.extensions.agents.x-k8s.io \
  sandboxclaims.extensions.agents.x-k8s.io sandboxwarmpools.extensions.agents.x-k8s.io; do
  kubectl wait --for=condition=Established --timeout=60s "crd/$crd" >/dev/null || fail "CRD $crd not established"
done

# --- 3. the controller -------------------------------------------------------
if ! ready; then
  mkdir -p "$K/logs"
  setsid "$DIR/agent-sandbox-controller" --kubeconfig="$KUBECONFIG" --extensions \
    --metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081 \
    >"$K/logs/agent-sandbox.log" 2>&1 </dev/null &
  echo $! >"$K/agent-sandbox.pid"
  n=0
  until ready; do
    n=$((n + 1))
    if [ $n -gt 600 ]; then
      tail -20 "$K/logs/agent-sandbox.log" >&2
      fail "timeout (60 s) waiting for agent-sandbox-controller; log $K/logs/agent-sandbox.log"
    fi
    sleep 0.1
  done
fi
warn "agent-sandbox v$ASV ready in $(elapsed)"
exit 0
