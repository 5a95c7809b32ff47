#!/usr/bin/env bash
# Install and configure what the tests, the lab and the demo run on this
# machine itself (docs/testing.md, "Test nodes"), then check that every one of those
# commands is really there. `make deps` runs it; nothing is installed by hand.
#
# COMMANDS is the one list: each host command with the Debian package that
# provides it. Add a command here before a test, the lab or the demo uses
# it: a machine that already has it by chance hides the missing step.
# Packages are installed without Recommends, so anything that is only a
# Recommends of another package (slirp4netns is one of podman's) must be
# listed itself.
#
# Why each podman setting exists:
#   - crun cannot set RLIMIT_NOFILE/NPROC here (no CAP_SYS_RESOURCE, hard
#     nofile limit 20000) and refuses hybrid cgroups, so we use runc with
#     ulimits that fit under the hard limit;
#   - there is no systemd as PID 1, so the systemd cgroup manager and the
#     journald events logger cannot work: use cgroupfs and a file logger.
# Everything is only changed when it differs, so this is idempotent.
# `host-setup.sh --check` only checks the commands.
set -euo pipefail

COMMANDS=(
    podman:podman               # test nodes, the lab, Molecule's driver
    runc:runc                   # podman's runtime here (crun cannot run, see above)
    slirp4netns:slirp4netns     # storage and backup nodes reach the host's loopback
    debootstrap:debootstrap     # base images (tools/build-image.sh)
    tar:tar                     # base images
    sha256sum:coreutils         # base images' recipe hash
    dpkg-deb:dpkg               # promtool and Prometheus (tools/prometheus-tools.sh)
    apt-get:apt                 # the same
    ssh:openssh-client          # the lab's nodes over real SSH
    ssh-keygen:openssh-client   # the lab's key
    losetup:mount               # storage tests detach their loop devices
    git:git                     # sanity (ansible-test) and the collection build
    shellcheck:shellcheck       # ansible-test sanity
    chromium:chromium           # the drift report looked at in a browser
    gpg:gpg                     # unit tests sign test repositories (apt_repo, _openpgp)
    gpgv:gpgv                   # apt_repo's signature check in its unit tests
)

# The check after installing: every command present, or its package named.
check_commands() {
    local entry cmd pkg absent=0
    for entry in "${COMMANDS[@]}"; do
        cmd=${entry%%:*} pkg=${entry#*:}
        if ! command -v "$cmd" >/dev/null 2>&1; then
            echo "host-setup: command '$cmd' is missing: install the Debian package '$pkg'" >&2
            absent=1
        fi
    done
    ((absent == 0)) || return 1
    echo "host-setup: all ${#COMMANDS[@]} host commands present"
}

# --check: only the check, nothing installed or written.
if [[ ${1:-} == --check ]]; then
    check_commands
    exit
fi

conf=/etc/containers/containers.conf
want=$(cat <<'TOML'
# Managed by gpufleet tools/host-setup.sh
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
TOML
)

packages=()
for entry in "${COMMANDS[@]}"; do
    pkg=${entry#*:}
    [[ " ${packages[*]} " == *" $pkg "* ]] || packages+=("$pkg")
done
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "host-setup: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p /etc/containers
if [[ ! -f $conf ]] || [[ "$(cat "$conf")" != "$want" ]]; then
    printf '%s\n' "$want" >"$conf"
    echo "host-setup: wrote $conf"
else
    echo "host-setup: $conf already up to date"
fi

check_commands
