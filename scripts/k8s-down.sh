#!/usr/bin/env bash
# scripts/k8s-down.sh — stops the one-node cluster scripts/setup-k8s.sh
# started and removes its state directory ($CORRAL_K8S_DIR, default
# /tmp/corral-k8s): pods first (through the kubelet, which tears down their
# containers and network namespaces), then the kubelet, the control plane and
# etcd, then what is left in the PRIVATE containerd, the containerd itself,
# the mounts below the state directory, the pod bridge and the kubelet's
# cgroups. Processes are stopped by the PIDs the setup wrote, never by name;
# nothing of Docker's (its containerd included) is touched. The build cache
# (the kube binaries) is kept. Idempotent: nothing running is a no-op.
set -uo pipefail

K=${CORRAL_K8S_DIR:-/tmp/corral-k8s}
[ -d "$K" ] || exit 0
export KUBECONFIG=$K/admin.kubeconfig
sock=$K/containerd/containerd.sock
c() { ctr --address "$sock" -n k8s.io "$@"; }

stop() {
  local pid
  pid=$(cat "$K/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -9 "$pid" 2>/dev/null
}
# 0. agent-sandbox's controller first, so no warm pool or Sandbox makes a pod again
stop agent-sandbox

# 1. let the kubelet stop every pod, then stop the kubelet
if [ -f "$K/kubelet.pid" ] && kill -0 "$(cat "$K/kubelet.pid")" 2>/dev/null; then
  timeout 10 kubectl delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1
  for _ in $(seq 100); do
    [ -z "$(c tasks ls -q 2>/dev/null | head -1)" ] && break
    sleep 0.2
  done
fi
# the API server before etcd (with etcd gone first its shutdown stalls)
for p in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop $p; done

# 2. what is left in our containerd: kill and delete tasks (their shims exit), delete containers
if [ -S "$sock" ]; then
  for t in $(c tasks ls -q 2>/dev/null); do c tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  sleep 0.5
  for t in $(c tasks ls -q 2>/dev/null); do c tasks delete -f "$t" >/dev/null 2>&1; done
  for x in $(c containers ls -q 2>/dev/null); do c containers delete "$x" >/dev/null 2>&1; done
fi
stop containerd

# 3. mounts below $K, the pod bridge, the kubelet's cgroups
grep -o " $K[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
ip link del corral0 2>/dev/null
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
done
rm -rf "$K"
rm -f /tmp/corral-k8s.kubeconfig-path
exit 0
