"""What a node converged by gpufleet.cloud.baseline really has."""

from __future__ import annotations

import re

import pytest
from conftest import assert_file, assert_package, assert_unit_running

SYSCTL_FILE = "/etc/sysctl.d/90-gpufleet-baseline.conf"


@pytest.mark.parametrize(
    "name", ["ca-certificates", "curl", "gnupg", "jq", "kmod", "numactl", "pciutils", "chrony", "ethtool"]
)
def test_base_packages_installed(host, name):
    assert_package(host, name)


def test_sysctl_file_has_every_parameter(host):
    content = assert_file(host, SYSCTL_FILE)
    params = dict(
        (k.strip(), v.strip()) for k, v in (line.split("=", 1) for line in content.splitlines() if "=" in line)
    )
    assert params["kernel.numa_balancing"] == "0"
    assert params["vm.zone_reclaim_mode"] == "0"
    assert params["net.core.rmem_max"] == "268435456"
    assert params["net.core.wmem_max"] == "268435456"
    assert params["net.ipv4.tcp_rmem"] == "4096 87380 134217728"
    assert params["net.ipv4.conf.all.arp_ignore"] == "1"
    # baseline_sysctl_extra from the scenario is merged in
    assert params["vm.max_map_count"] == "1048576"


def test_memlock_and_nofile_for_sessions(host):
    content = assert_file(host, "/etc/security/limits.d/90-gpufleet-baseline.conf")
    assert re.search(r"^\*\s+hard\s+memlock\s+unlimited$", content, re.M)
    assert re.search(r"^\*\s+soft\s+memlock\s+unlimited$", content, re.M)
    assert re.search(r"^\*\s+hard\s+nofile\s+1048576$", content, re.M)


def test_memlock_for_services_is_live(host):
    assert_file(
        host,
        "/etc/systemd/system.conf.d/90-gpufleet-baseline.conf",
        contains=("DefaultLimitMEMLOCK=infinity", "DefaultLimitNOFILE=1048576"),
    )
    # The handler re-executed systemd, so the running manager uses the new
    # defaults (systemd's own default is 8M). A container cannot raise its
    # process limits past the host's hard limit, so the per-process value is
    # checked by the gpu scenario on real machines, not here.
    show = host.run("systemctl show --property DefaultLimitMEMLOCK --property DefaultLimitNOFILE").stdout
    assert "DefaultLimitMEMLOCK=infinity" in show
    assert "DefaultLimitNOFILE=1048576" in show


def test_chrony_configured_and_running(host):
    content = assert_file(host, "/etc/chrony/chrony.conf", contains=("server 127.0.0.1 iburst", "makestep 1 3"))
    assert "pool " not in content, "the default pool must be replaced by the configured servers"
    assert_unit_running(host, "chrony")
    sources = host.run("chronyc -n sources")
    assert sources.rc == 0
    assert "127.0.0.1" in sources.stdout


def test_chrony_does_not_steer_a_container_clock(host):
    # Molecule nodes are containers: chrony must run as a monitor (-x).
    assert_file(
        host,
        "/etc/systemd/system/chrony.service.d/90-gpufleet-container.conf",
        contains=("ConditionCapability=", "-x"),
    )
    cmdline = host.run("cat /proc/$(systemctl show --property MainPID --value chrony)/cmdline | tr '\\0' ' '")
    assert " -x" in cmdline.stdout


def test_hostname_files(host):
    assert host.file("/etc/hostname").content_string == "gpu-node-01.lab.internal\n"
    hosts = host.file("/etc/hosts").content_string
    assert re.search(r"^127\.0\.1\.1\s+gpu-node-01\.lab\.internal gpu-node-01$", hosts, re.M)
    # In a container the running hostname is the host's business: untouched.
    assert host.run("hostname").stdout.strip() != "gpu-node-01.lab.internal"
