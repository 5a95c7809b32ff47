"""The podman command lines of the lab, without podman."""

from __future__ import annotations

import subprocess

from gpufleet.lab import _nodes
from gpufleet.lab._podman import Podman


def test_a_lab_node_publishes_only_loopback_and_may_firewall_itself():
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    Podman(runner).run_node(_nodes.node(2), "localhost/gpufleet-debian:12")
    argv = calls[0]
    assert argv[argv.index("--publish") + 1] == "127.0.0.12:2202:22"
    assert argv[argv.index("--cap-add") + 1] == "NET_ADMIN"
    assert "--privileged" not in argv
    assert argv[-2:] == ["localhost/gpufleet-debian:12", "/sbin/init"]


def test_bridge_gateway_is_read_from_podmans_default_network():
    inspected = '[{"name": "podman", "subnets": [{"subnet": "10.88.0.0/16", "gateway": "10.88.0.1"}]}]'

    def runner(argv):
        assert argv[:4] == ["podman", "network", "inspect", "podman"]
        return subprocess.CompletedProcess(argv, 0, inspected, "")

    assert Podman(runner).bridge_gateway() == "10.88.0.1"
