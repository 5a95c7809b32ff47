"""The podman command lines of the lab, without podman."""

from __future__ import annotations

import subprocess

import pytest

from gpufleet.lab import _nodes
from gpufleet.lab._podman import Podman, PodmanError


def test_a_lab_node_publishes_only_loopback_and_may_firewall_itself():
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    Podman(runner).run_node(_nodes.node(2), "localhost/gpufleet-debian:12")
    argv = calls[0]
    assert argv[argv.index("--publish") + 1] == "127.0.0.12:2202:22"
    caps = {argv[i + 1] for i, arg in enumerate(argv) if arg == "--cap-add"}
    assert caps == {"NET_ADMIN", "SYS_ADMIN"}
    assert "--privileged" not in argv
    assert argv[-2:] == ["localhost/gpufleet-debian:12", "/sbin/init"]


def test_a_gpu_stack_node_is_privileged_for_docker_and_labelled():
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    Podman(runner).run_node(_nodes.node(3, gpu_stack=True), "localhost/gpufleet-debian:13")
    argv = calls[0]
    assert argv[argv.index("--publish") + 1] == "127.0.0.13:2203:22"
    assert {"--privileged", "--cgroupns=private", "--tmpfs=/var/lib/docker:rw,exec,size=4g"} <= set(argv)
    assert argv[argv.index("gpufleet.lab.gpu-stack=1") - 1] == "--label"


def test_gpu_stack_containers_are_found_by_their_label():
    def runner(argv):
        assert "label=gpufleet.lab.gpu-stack=1" in argv
        return subprocess.CompletedProcess(argv, 0, '[{"Names": ["gpufleet-lab-3"]}]', "")

    assert Podman(runner).gpu_stack_containers() == {"gpufleet-lab-3"}


def test_bridge_gateway_is_read_from_podmans_default_network():
    inspected = '[{"name": "podman", "subnets": [{"subnet": "10.88.0.0/16", "gateway": "10.88.0.1"}]}]'

    def runner(argv):
        assert argv[:4] == ["podman", "network", "inspect", "podman"]
        return subprocess.CompletedProcess(argv, 0, inspected, "")

    assert Podman(runner).bridge_gateway() == "10.88.0.1"


IMPROPER = "Error: cannot remove container 20cb as it could not be stopped: container state improper: stopped"


def podman_rm(rm_results, exists=True):
    """A runner whose rm answers from rm_results in turn; `container
    exists` answers `exists`."""
    calls = []

    def runner(argv):
        calls.append(list(argv))
        if argv[1] == "rm":
            rc = rm_results.pop(0)
            return subprocess.CompletedProcess(argv, rc, "", IMPROPER if rc else "")
        if argv[1:3] == ["container", "exists"]:
            return subprocess.CompletedProcess(argv, 0 if exists else 1, "", "")
        raise AssertionError(argv)

    return runner, calls


def test_a_node_that_stopped_while_being_removed_is_removed_again():
    runner, calls = podman_rm([125, 0])
    Podman(runner).remove("gpufleet-lab-2")
    assert [c[1] for c in calls] == ["rm", "container", "rm"]


def test_a_failed_rm_of_a_container_already_gone_is_done():
    runner, calls = podman_rm([125], exists=False)
    Podman(runner).remove("gpufleet-lab-2")
    assert [c[1] for c in calls] == ["rm", "container"]


def test_a_container_that_cannot_be_removed_is_an_error_that_names_it():
    runner, _calls = podman_rm([125, 125, 125])
    with pytest.raises(PodmanError, match="podman rm --force gpufleet-lab-2 failed 3 times: .*state improper"):
        Podman(runner).remove("gpufleet-lab-2")
