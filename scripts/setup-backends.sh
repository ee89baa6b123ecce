#!/usr/bin/env bash
# scripts/setup-backends.sh — installs (as root) and starts the real
# components corral's tests use: a Docker engine with the local test image,
# Debian's docker-registry binary (provider/docker's pull tests start their
# own instance on loopback; the packaged service is not needed), a PostgreSQL cluster with a test database (scripts/setup-postgres.sh), the
# agent CLIs from npm (scripts/setup-agents.sh) and Debian's chromium for the
# web page's browser test (scripts/setup-browser.sh) and a one-node
# Kubernetes cluster on loopback (scripts/setup-k8s.sh; a cold build of the
# kube binaries costs ~6.5 min once, then they are cached) and QEMU with an
# unpacked Debian cloud kernel for provider/qemu (scripts/setup-qemu.sh; ~45 s
# once, then a no-op).
# Idempotent: what already runs is left alone. Under CI=true any failure is
# fatal; elsewhere it warns and the affected tests skip with the reason.
set -uo pipefail
cd "$(dirname "$0")/.."

ci=${CI:-}
warn() { printf 'setup: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  if [ "$ci" = true ]; then exit 1; fi
}
is_root() { [ "$(id -u)" = 0 ]; }

apt_updated=
apt_install() {
  is_root || { fail "not root: cannot install $*"; return 1; }
  if [ -z "$apt_updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || { fail "apt-get update failed"; return 1; }
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || { fail "apt-get install $* failed"; return 1; }
}

# --- Docker ------------------------------------------------------------------
docker_ready() { docker info >/dev/null 2>&1; }

setup_docker() {
  if ! command -v dockerd >/dev/null 2>&1 || ! [ -x /bin/busybox ]; then
    apt_install docker.io busybox-static || return 1
  fi
  if ! docker_ready; then
    if ! is_root; then
      fail "no Docker engine answers and not root: cannot start dockerd"
      return 1
    fi
    warn "starting dockerd (log: /tmp/corral-dockerd.log)"
    setsid nohup dockerd >/tmp/corral-dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 1 120); do
      docker_ready && break
      sleep 0.5
    done
    docker_ready || { fail "dockerd did not answer within 60s; see /tmp/corral-dockerd.log"; tail -20 /tmp/corral-dockerd.log >&2; return 1; }
  fi
  scripts/docker-test-image.sh || { fail "building the docker test image failed"; return 1; }
  if ! command -v docker-registry >/dev/null 2>&1; then
    apt_install docker-registry || return 1
  fi
}

setup_docker
scripts/setup-postgres.sh || fail "setting up PostgreSQL failed"
scripts/setup-agents.sh || fail "installing the agent CLIs failed"
scripts/setup-browser.sh || fail "installing chromium failed"
scripts/setup-k8s.sh || fail "setting up the one-node Kubernetes cluster failed"
scripts/setup-qemu.sh || fail "setting up QEMU and the guest kernel failed"
exit 0
