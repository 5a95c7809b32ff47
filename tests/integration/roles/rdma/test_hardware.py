"""On a machine with an RDMA device, the rdma role makes it usable.

The test applies gpufleet.cloud.rdma to the machine it runs on (as root),
then checks the device with ibv_devinfo and moves data through it with a
perftest loopback (server and client on this machine, over 127.0.0.1). It
skips where /sys/class/infiniband has no device."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.helpers import converge_this_machine

pytestmark = pytest.mark.rdma

SYSFS = Path("/sys/class/infiniband")


def run(*argv: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout)


@pytest.fixture(scope="module")
def devices() -> list[str]:
    found = sorted(p.name for p in SYSFS.iterdir()) if SYSFS.is_dir() else []
    if not found:
        pytest.skip("no RDMA device in /sys/class/infiniband")
    if os.geteuid() != 0:
        pytest.skip("the rdma role is applied to this machine, which needs root")
    return found


@pytest.fixture(scope="module")
def fact(devices, tmp_path_factory) -> dict:
    converge_this_machine("gpufleet.cloud.rdma", {}, tmp_path_factory.mktemp("rdma"))
    return json.loads(Path("/etc/ansible/facts.d/gpufleet_rdma.fact").read_text())


def active_port(device: str) -> bool:
    return any("ACTIVE" in (port / "state").read_text() for port in (SYSFS / device / "ports").iterdir())


def test_fact_reports_the_devices(fact, devices):
    assert fact["device_found"] is True
    assert fact["devices"] == devices
    assert fact["variant"] in {"efa", "erdma", "roce", "ib"}


def test_ibv_devinfo_sees_every_device(fact, devices):
    out = run("ibv_devinfo", "-l")
    assert out.returncode == 0, out.stderr
    assert sorted(re.findall(r"^\s+(\S+)$", out.stdout, re.M)) == devices


def test_perftest_loopback_moves_data(fact, devices):
    device = next((d for d in devices if active_port(d)), None)
    if device is None:
        pytest.skip(f"no device with an active port among {devices}")
    # EFA has no reliable-connected queue pairs (RDMA write): it is tested
    # with datagram sends. eRDMA is iWARP: connections go through rdma_cm.
    tool, extra = {"efa": ("ib_send_bw", ["-c", "UD"]), "erdma": ("ib_write_bw", ["-R"])}.get(
        fact["variant"], ("ib_write_bw", [])
    )
    common = [tool, "-d", device, "-D", "2", "--report_gbits", *extra]
    server = subprocess.Popen(common, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        client = run(*common, "127.0.0.1")
    finally:
        server_out, server_err = server.communicate(timeout=60)
    assert client.returncode == 0, client.stdout + client.stderr + server_out + server_err
    # The result row: bytes, iterations, peak and average bandwidth, message rate.
    rows = [line.split() for line in client.stdout.splitlines() if re.match(r"^\s*\d+\s+\d+\s+[\d.]+", line)]
    assert rows, client.stdout
    assert float(rows[-1][3]) > 0, client.stdout
