#!/bin/sh
# docker-test-image.sh builds corral-test-base, the local image the Docker
# provider's tests run in: FROM scratch plus the host's static BusyBox (Debian
# package busybox-static) with every applet linked, /tmp (1777), /workspace,
# /root and an /etc/passwd and /etc/group that know root.
#
# Nothing is pulled: the build context is a temporary directory made here and
# the Dockerfile starts FROM scratch. The script is idempotent: the image
# carries a label with a digest of its inputs (the BusyBox binary and this
# script), and a second run with the same inputs does nothing.
#
# Usage: scripts/docker-test-image.sh [IMAGE]
#   IMAGE    image name (default: $CORRAL_DOCKER_TEST_IMAGE or corral-test-base)
#   BUSYBOX  the static BusyBox to copy (default: /bin/busybox)
#   FORCE=1  rebuild even when the image is up to date
set -eu

image=${1:-${CORRAL_DOCKER_TEST_IMAGE:-corral-test-base}}
busybox=${BUSYBOX:-/bin/busybox}

die() {
	echo "docker-test-image: $*" >&2
	exit 1
}

command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed"
[ -x "$busybox" ] || die "$busybox not found; install a static BusyBox (Debian: apt-get install busybox-static)"
# A dynamically linked BusyBox would need the host's libc inside the image.
if command -v file >/dev/null 2>&1 && ! file -L "$busybox" | grep -q 'statically linked'; then
	die "$busybox is not statically linked; install busybox-static"
fi
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine reachable (docker version failed)"

digest=$(cat "$busybox" "$0" | sha256sum | cut -c1-32)
if [ "${FORCE:-0}" != 1 ]; then
	have=$(docker image inspect --format '{{index .Config.Labels "dev.corral.test-image.digest"}}' "$image" 2>/dev/null || true)
	if [ "$have" = "$digest" ]; then
		echo "docker-test-image: $image is up to date ($digest)"
		exit 0
	fi
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT INT TERM
root=$ctx/rootfs
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" \
	"$root/etc" "$root/root" "$root/tmp" "$root/workspace" "$root/var/tmp"
chmod 1777 "$root/tmp" "$root/var/tmp"
cp "$busybox" "$root/bin/busybox"
chmod 755 "$root/bin/busybox"
# Every applet at the path BusyBox itself reports (bin/sh, usr/bin/env, ...),
# as a link to /bin/busybox.
"$busybox" --list-full | while IFS= read -r applet; do
	case $applet in
	'' | */busybox | busybox) continue ;;
	esac
	[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done
[ -e "$root/bin/sh" ] || die "BusyBox has no sh applet"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin
LABEL dev.corral.test-image="true" dev.corral.test-image.digest="$digest"
CMD ["sh"]
EOF

# The classic builder needs nothing from a registry for FROM scratch.
DOCKER_BUILDKIT=0 docker build --quiet --tag "$image" "$ctx" >/dev/null 2>"$ctx/build.err" || {
	cat "$ctx/build.err" >&2
	die "docker build failed"
}
echo "docker-test-image: built $image ($digest)"
