#!/bin/sh
# Usage: import-test-image.sh IMAGE PROGRAM...
# No registry is reachable, so test images are made here: a rootfs holding
# the given programs and the libraries they link, imported with
# `docker import`. Does nothing when IMAGE already exists.
set -eu
image=$1
shift
docker image inspect "$image" >/dev/null 2>&1 && exit 0
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for program in "$@"; do
    for file in "$program" $(ldd "$program" | grep -o '/[^ ]*'); do
        mkdir -p "$root$(dirname "$file")"
        cp -L "$file" "$root$file"
    done
done
# Debian's merged /usr: the loader is looked up under /lib64.
for dir in bin lib lib64; do
    [ -e "$root/$dir" ] || [ ! -d "$root/usr/$dir" ] || ln -s "usr/$dir" "$root/$dir"
done
tar -C "$root" -c . | docker import - "$image" >/dev/null
