#!/usr/bin/env bash
# scripts/setup-qemu.sh — what provider/qemu needs on the host (issue 19;
# recipes in the shared reference k8s-microvm-recipes.md, Part B):
#   1. Debian packages qemu-system-x86, qemu-utils (qemu-img), e2fsprogs
#      (mke2fs -d), cpio and busybox-static, installed when missing (root).
#   2. Debian's cloud kernel, downloaded with apt-get download and UNPACKED
#      (never installed) into $CACHE/kernel-$KVER: vmlinuz plus the module
#      tree the guest's initramfs loads its virtio drivers from.
#   3. $CACHE/current, a file naming the kernel directory, which the provider
#      reads when Options.Kernel is not set.
# CACHE defaults to /var/cache/corral-qemu. Idempotent: a second run only
# checks files (well under a second). Under CI=true every failure exits
# non-zero; elsewhere it warns and exits 0, and the qemu tests skip with the
# reason.
set -uo pipefail

CACHE=${CORRAL_QEMU_CACHE:-/var/cache/corral-qemu}
ci=${CI:-}
warn() { printf 'setup-qemu: %s\n' "$*" >&2; }
fail() {
  warn "$*"
  if [ "$ci" = true ]; then exit 1; fi
  exit 0
}

need=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
command -v qemu-img >/dev/null 2>&1 || need+=(qemu-utils)
command -v mke2fs >/dev/null 2>&1 || need+=(e2fsprogs)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "not root: cannot install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || fail "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
    fail "apt-get install ${need[*]} failed"
fi

mkdir -p "$CACHE" || fail "cannot create $CACHE"
if [ -s "$CACHE/current" ] && [ -f "$(cat "$CACHE/current")/vmlinuz" ]; then
  exit 0
fi
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$kpkg" ] || fail "apt-cache knows no linux-image-cloud-amd64 (apt-get update?)"
kver=${kpkg#linux-image-}
kdir=$CACHE/kernel-$kver
if ! [ -f "$kdir/vmlinuz" ]; then
  tmp=$(mktemp -d "$CACHE/.dl.XXXXXX") || fail "mktemp failed"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download "$kpkg" >/dev/null 2>&1) || fail "apt-get download $kpkg failed"
  dpkg-deb -x "$tmp"/"${kpkg}"_*.deb "$tmp/x" || fail "unpacking $kpkg failed"
  mkdir -p "$tmp/k"
  cp "$tmp/x/boot/vmlinuz-$kver" "$tmp/k/vmlinuz" || fail "no vmlinuz in $kpkg"
  cp "$tmp/x/boot/config-$kver" "$tmp/k/config" 2>/dev/null || true
  mv "$tmp/x/lib/modules/$kver" "$tmp/k/modules" || fail "no module tree in $kpkg"
  rm -rf "$kdir" && mv "$tmp/k" "$kdir" || fail "cannot move the kernel into $kdir"
fi
echo "$kdir" >"$CACHE/current.tmp" && mv "$CACHE/current.tmp" "$CACHE/current"
warn "kernel $kver unpacked into $kdir"
