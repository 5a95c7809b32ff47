#!/usr/bin/env bash
# Build a systemd Debian base image for Molecule and the lab fleet with
# debootstrap, because no container registry is reachable from these machines.
#
# Usage: build-image.sh SUITE TAG      e.g. build-image.sh bookworm 12
# Produces localhost/gpufleet-debian:TAG.
#
# Idempotent: the image carries a label with a hash of this recipe (this file
# plus the suite); when the label matches, nothing is rebuilt.
set -euo pipefail

suite=${1:?usage: build-image.sh SUITE TAG}
tag=${2:?usage: build-image.sh SUITE TAG}
image=localhost/gpufleet-debian:$tag
mirror=${GPUFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# python3-apt is preinstalled because Ansible's apt module cannot run in check
# mode without it; openssh-server and sudo make the same image usable as a lab
# node reached over real SSH.
packages=python3,python3-apt,systemd,systemd-sysv,dbus,ca-certificates,iproute2,procps,openssh-server,sudo

recipe=$( { cat "$0"; echo "$suite $mirror"; } | sha256sum | cut -c1-16)
current=$(podman image inspect --format '{{ index .Labels "gpufleet.recipe" }}' "$image" 2>/dev/null || true)
if [[ $current == "$recipe" ]]; then
    echo "build-image: $image is up to date (recipe $recipe)"
    exit 0
fi

root=$(mktemp -d "/var/tmp/gpufleet-rootfs-$tag.XXXXXX")
trap 'rm -rf "$root"' EXIT

echo "build-image: debootstrap $suite into $root"
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -n 30 "$root.log" >&2
    exit 1
}
rm -f "$root.log"

# deb822 sources with every component, so non-free NVIDIA packages resolve.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES

# Settings for test nodes only, never for the roles' real targets: dpkg
# skips its fsync per unpacked file (a test node is thrown away, and a
# crash mid-unpack is not what a test is about), and apt fetches no
# translated descriptions.
cat >"$root/etc/dpkg/dpkg.cfg.d/gpufleet-test-node" <<'DPKG'
force-unsafe-io
DPKG
cat >"$root/etc/apt/apt.conf.d/90gpufleet-test-node" <<'APT'
Acquire::Languages "none";
APT

# debootstrap's lists name main only, and a stale list of main would let
# cache_valid_time skip the update with non-free packages missing: drop
# them, then fetch every component's lists once here, so each node does
# not download and parse them again (the roles refresh them as usual once
# they are older than their cache_valid_time).
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
mkdir -p "$root/var/lib/apt/lists/partial"
had_resolv=0
[[ -e $root/etc/resolv.conf ]] && had_resolv=1
((had_resolv)) || cp /etc/resolv.conf "$root/etc/resolv.conf"
chroot "$root" apt-get -q update >"$root.log" 2>&1 || {
    tail -n 30 "$root.log" >&2
    exit 1
}
((had_resolv)) || rm -f "$root/etc/resolv.conf"
rm -f "$root.log" "$root"/var/cache/apt/archives/*.deb
: >"$root/etc/machine-id"

# Units that cannot work in a container, or that roles manage themselves.
for unit in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
    getty@tty1.service console-getty.service systemd-timesyncd.service; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Host keys are generated per node at first boot, never baked into the image;
# the empty ExecStartPre= resets the list so keygen runs before `sshd -t`.
rm -f "$root"/etc/ssh/ssh_host_*
mkdir -p "$root/etc/systemd/system/ssh.service.d"
cat >"$root/etc/systemd/system/ssh.service.d/gpufleet-hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT

tar -C "$root" -c . | podman import \
    --change 'CMD ["/sbin/init"]' \
    --change 'STOPSIGNAL SIGRTMIN+3' \
    --change "LABEL gpufleet.recipe=$recipe" \
    - "$image" >/dev/null
echo "build-image: built $image (recipe $recipe)"
