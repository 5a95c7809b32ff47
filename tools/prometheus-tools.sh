#!/usr/bin/env bash
# prometheus and promtool from Debian's prometheus package, unpacked into
# .cache/tools/prometheus for the monitoring tests (promtool check/test
# rules, a real Prometheus server that scrapes a test node).
#
# Unpacked, not installed: on these machines, with no systemd as PID 1, the
# package's init script would start a Prometheus server listening on every
# address of a machine other engineers share. Idempotent: it only fetches
# again when the candidate version changes.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=.cache/tools/prometheus
candidate() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}'; }
version=$(candidate)
if [[ -z $version || $version == "(none)" ]]; then
    apt-get update -qq
    version=$(candidate)
fi
if [[ -x $dest/promtool && -x $dest/prometheus && "$(cat "$dest/VERSION" 2>/dev/null)" == "$version" ]]; then
    echo "prometheus-tools: $dest is up to date ($version)"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt drops privileges to _apt for downloads; give it a directory it can write.
chmod 0777 "$work"
(cd "$work" && apt-get download -q "prometheus=$version" >/dev/null 2>&1)
dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
mkdir -p "$dest"
install -m 0755 "$work/root/usr/bin/prometheus" "$work/root/usr/bin/promtool" "$dest/"
echo "$version" >"$dest/VERSION"
echo "prometheus-tools: unpacked prometheus and promtool $version into $dest"
