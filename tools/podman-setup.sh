#!/usr/bin/env bash
# Install and configure podman for the test machines described in shared/TESTHOSTS.md.
#
# Why each setting exists:
#   - crun cannot set RLIMIT_NOFILE/NPROC here (no CAP_SYS_RESOURCE, hard
#     nofile limit 20000) and refuses hybrid cgroups, so we use runc with
#     ulimits that fit under the hard limit;
#   - there is no systemd as PID 1, so the systemd cgroup manager and the
#     journald events logger cannot work: use cgroupfs and a file logger.
# The file is only rewritten when its content differs, so this is idempotent.
set -euo pipefail

conf=/etc/containers/containers.conf
want=$(cat <<'TOML'
# Managed by gpufleet tools/podman-setup.sh
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
TOML
)

# Debian packages the tests and the lab need on the machine itself: podman
# with runc, debootstrap for base images, ssh for the lab, shellcheck for
# ansible-test sanity, headless chromium to look at the drift report.
packages=(podman runc debootstrap openssh-client git shellcheck chromium)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "podman-setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p /etc/containers
if [[ ! -f $conf ]] || [[ "$(cat "$conf")" != "$want" ]]; then
    printf '%s\n' "$want" >"$conf"
    echo "podman-setup: wrote $conf"
else
    echo "podman-setup: $conf already up to date"
fi
