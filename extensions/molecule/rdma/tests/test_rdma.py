"""What a node converged by gpufleet.cloud.rdma really has.

rdma-debian12 runs with the defaults (variant auto, which finds no device in a
container) and GPUDirect RDMA forced on; rdma-debian13 is an AWS EFA node by
its inventory variable, with the EFA installer from a file mirror."""

from __future__ import annotations

import json

import pytest
from conftest import assert_file, assert_package

MODULES_FILE = "/etc/modules-load.d/gpufleet-rdma.conf"
PEERMEM_FILE = "/etc/modules-load.d/gpufleet-nvidia-peermem.conf"
FACT_FILE = "/etc/ansible/facts.d/gpufleet_rdma.fact"


def is_efa_node(host) -> bool:
    return host.backend.hostname.endswith("debian13")


def listed_modules(content: str) -> list[str]:
    return [line for line in content.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize(
    "name", ["rdma-core", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils", "perftest", "infiniband-diags"]
)
def test_userspace_installed(host, name):
    assert_package(host, name)


def test_verbs_tools_run_and_report_no_device(host):
    # The tools work; a container has no RDMA device, and they say so.
    devinfo = host.run("ibv_devinfo")
    assert devinfo.rc != 0
    assert "Failed to get IB devices list" in devinfo.stderr or "No IB devices found" in devinfo.stdout
    assert host.run("ib_write_bw --version").stdout.startswith("Version:")


def test_memlock_for_job_users(host):
    content = assert_file(host, "/etc/security/limits.d/91-gpufleet-rdma.conf")
    lines = [line.split() for line in content.splitlines() if line and not line.startswith("#")]
    assert lines == [
        ["@trainers", "soft", "memlock", "unlimited"],
        ["@trainers", "hard", "memlock", "unlimited"],
        ["root", "soft", "memlock", "unlimited"],
        ["root", "hard", "memlock", "unlimited"],
    ]


def test_no_device_is_a_fact_not_a_failure(host):
    fact = json.loads(assert_file(host, FACT_FILE))
    assert fact["device_found"] is False
    assert fact["devices"] == []
    assert fact["variant"] == ("efa" if is_efa_node(host) else "none")


def test_boot_modules_follow_the_variant(host):
    if is_efa_node(host):
        content = assert_file(host, MODULES_FILE)
        assert listed_modules(content) == ["efa", "ib_uverbs", "ib_umad"]
    else:
        # auto with no device means no variant: nothing to load at boot.
        assert not host.file(MODULES_FILE).exists


def test_gpudirect_rdma_at_boot_only_when_asked(host):
    if is_efa_node(host):
        # auto, and this node has neither a GPU nor an RDMA device.
        assert not host.file(PEERMEM_FILE).exists
        assert json.loads(host.file(FACT_FILE).content_string)["gpudirect_rdma"] is False
    else:
        assert listed_modules(assert_file(host, PEERMEM_FILE)) == ["nvidia-peermem"]
        assert json.loads(host.file(FACT_FILE).content_string)["gpudirect_rdma"] is True


def test_efa_installer_from_the_mirror_ran_once(host):
    if not is_efa_node(host):
        # Only the efa variant fetches the installer.
        assert not host.file("/var/cache/gpufleet/efa").exists
        return
    tarball = host.file("/var/cache/gpufleet/efa/aws-efa-installer-1.43.1.tar.gz")
    mirrored = host.file("/srv/mirror/efa/aws-efa-installer-1.43.1.tar.gz")
    assert tarball.exists
    assert tarball.sha256sum == mirrored.sha256sum
    # One call in total: converge ran it; idempotence and both check passes did not.
    calls = host.file("/var/log/gpufleet-test-efa-installer.log").content_string.splitlines()
    assert calls == ["-y --skip-limit-conf"]
    stamps = host.run("ls /var/lib/gpufleet/efa").stdout.split()
    assert len(stamps) == 1 and stamps[0].startswith("1.43.1-")
