#!/usr/bin/env bash
# scripts/setup-browser.sh — makes Debian's headless-capable Chromium
# (/usr/bin/chromium) available for the web page's browser test
# (server/browser_test.go).
#
# Idempotent: an installed chromium that starts is left alone. As root it
# installs Debian's chromium package when it is missing (apt-get update
# once). It prints errors and one status line, nothing else. Under CI=true
# every failure exits non-zero; elsewhere it warns and exits 0, and the
# browser test skips naming this script.
set -uo pipefail

bin=/usr/bin/chromium
logfile=/tmp/corral-setup-browser.log

ci=${CI:-}
warn() { printf 'setup-browser: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  if [ "$ci" = true ]; then exit 1; fi
  exit 0
}
is_root() { [ "$(id -u)" = 0 ]; }

version() { "$bin" --headless --no-sandbox --disable-gpu --version 2>/dev/null | head -n 1; }

if [ -x "$bin" ] && v=$(version) && [ -n "$v" ]; then
  printf 'setup-browser: %s ready at %s\n' "$v" "$bin" >&2
  exit 0
fi

is_root || fail "$bin is missing and not root: cannot install Debian's chromium"

: >"$logfile"
DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$logfile" 2>&1 ||
  { tail -n 20 "$logfile" >&2; fail "apt-get update failed (log: $logfile)"; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >>"$logfile" 2>&1 ||
  { tail -n 20 "$logfile" >&2; fail "apt-get install chromium failed (log: $logfile)"; }

[ -x "$bin" ] || fail "chromium is installed but $bin is missing (log: $logfile)"
v=$(version)
[ -n "$v" ] || fail "$bin is installed but does not start (try: $bin --headless --no-sandbox --version)"
printf 'setup-browser: %s ready at %s\n' "$v" "$bin" >&2
exit 0
