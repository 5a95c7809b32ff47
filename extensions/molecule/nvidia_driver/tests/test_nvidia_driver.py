"""What a container node converged by gpufleet.cloud.nvidia_driver (Debian
non-free source) really has. Debian 12 runs the proprietary modules (this
scenario, see molecule.yml), Debian 13 the open ones: the lab fleet's
GPU-stack node, which tests/integration/test_drift.py runs this file
against. A container has no GPU and cannot load modules: the no-GPU state
below is the truthful one."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import assert_dropin_moved_aside, assert_file, assert_package

# What Debian's archive offers, as the role's nvidia_driver_platforms says.
PINNED = {12: ("535", "535.309.01"), 13: ("550", "550.163.01")}
KERNEL = {12: ("nvidia-kernel-dkms", "nvidia-open-kernel-dkms"), 13: ("nvidia-open-kernel-dkms", "nvidia-kernel-dkms")}
USERSPACE = ["nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-cfg1", "libnvidia-ptxjitcompiler1"]


def held_names(host) -> set[str]:
    return set(host.check_output("apt-mark showhold").split())


def test_kernel_modules_of_the_chosen_flavour(host, major):
    chosen, other = KERNEL[major]
    assert assert_package(host, chosen).startswith(PINNED[major][1] + "-")
    assert not host.package(other).is_installed, f"{other} must not be installed beside {chosen}"


@pytest.mark.parametrize("name", USERSPACE)
def test_driver_packages_at_the_pinned_version_and_held(host, major, name):
    assert assert_package(host, name).startswith(PINNED[major][1] + "-")
    assert name in held_names(host)


def test_pin_makes_the_pinned_version_apt_s_choice(host, major):
    assert_file(
        host,
        "/etc/apt/preferences.d/gpufleet-nvidia_driver",
        contains=(f"Pin: version {PINNED[major][1]}*", "Pin-Priority: 1001", "src:nvidia-graphics-drivers"),
    )
    policy = host.check_output("apt-cache policy libnvidia-ml1")
    # "*** 535.309.01-0+deb12u1 1001": installed, and preferred at 1001.
    assert re.search(rf"^\s*\*\*\* {re.escape(PINNED[major][1])}-\S+ 1001$", policy, re.M), policy


def test_persistence_daemon_is_separate_and_enabled(host):
    # Debian versions nvidia-persistenced apart from the driver: not pinned.
    assert_package(host, "nvidia-persistenced")
    assert "nvidia-persistenced" not in held_names(host)
    assert host.service("nvidia-persistenced").is_enabled


def test_the_persistence_daemon_runs_the_packages_command_line(host):
    """The scenario's prepare.yml left a drop-in that turned persistence
    mode off: moved aside. The lab's GPU-stack node, which runs this file
    too, had none: systemd reads none there either."""
    if os.environ.get("MOLECULE_SCENARIO_NAME") == "nvidia_driver":
        assert_dropin_moved_aside(host, "nvidia-persistenced.service", "local.conf", "--no-persistence-mode")
    assert host.check_output("systemctl show -p DropInPaths --value nvidia-persistenced") == ""
    assert "--no-persistence-mode" not in host.check_output("systemctl cat nvidia-persistenced")


def test_nouveau_blacklisted(host):
    assert_file(
        host,
        "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf",
        contains=("blacklist nouveau\n", "options nouveau modeset=0\n"),
    )


def test_dkms_has_the_pinned_module_registered(host, major):
    # No kernel of its own in a container, so nothing is built; the source
    # is registered at the pinned version for the next kernel's DKMS hook.
    status = host.check_output("dkms status")
    assert re.search(rf"^nvidia-current(-open)?/{re.escape(PINNED[major][1])}: added$", status, re.M), status
    assert host.file("/etc/kernel/postinst.d/dkms").exists


def test_no_kernel_headers_in_a_container(host):
    # The running kernel is the host's: its headers are not the node's business.
    # dpkg also lists packages it merely knew of ("not-installed").
    states = host.run("dpkg-query -W -f '${Package} ${Status}\\n' 'linux-headers-*'").stdout
    installed = [line for line in states.splitlines() if line.endswith(" installed") and "not-installed" not in line]
    assert installed == []


def test_fabric_manager_decision_recorded_and_applied(host, major):
    fact = json.loads(assert_file(host, "/etc/ansible/facts.d/gpufleet_nvidia_driver.fact"))
    branch, version = PINNED[major]
    assert fact == {
        "source": "distro",
        "branch": branch,
        "version": version,
        "kernel_modules": "proprietary" if major == 12 else "open",
        "cuda_max": {12: "12.2", 13: "12.4"}[major],
        # No NVSwitch on the bus and no GPU: no fabric manager.
        "fabricmanager": False,
    }
    assert host.run("systemctl cat nvidia-fabricmanager").rc != 0


def test_nvidia_smi_reports_no_driver(host):
    # The truthful no-GPU state: installed, but no kernel driver to talk to.
    result = host.run("nvidia-smi")
    assert result.rc == 9, result.stdout + result.stderr
    assert "couldn't communicate with the NVIDIA driver" in result.stdout
