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


GONE = ("Error: runc: exec failed: unable to start container process: error adding pid 4799 to cgroups: "
        "failed to write 4799: openat2 /sys/fs/cgroup/{}/libpod_parent/libpod-4f87/cgroup.procs: "
        "no such file or directory: OCI runtime attempted to invoke a command that was not found\n")


def cgroups_gone(*hierarchies, still_gone=()):
    """A runner whose node lacks its directory in each of `hierarchies`
    (runc names one per attempt) until it is made, and in `still_gone`
    whatever is made."""
    gone = list(hierarchies)
    made, calls = [], []

    def runner(argv):
        calls.append(list(argv))
        missing = [h for h in gone if f"/sys/fs/cgroup/{h}/libpod_parent/libpod-4f87" not in made] + list(still_gone)
        if missing:
            return subprocess.CompletedProcess(argv, 127, "", GONE.format(missing[0]))
        return subprocess.CompletedProcess(argv, 0, "held\n", "")

    return runner, made, calls


def test_exec_makes_each_gone_cgroup_directory_again_and_says_so():
    runner, made, calls = cgroups_gone("systemd", "pids")
    said = []
    result = Podman(runner, make_dir=made.append, warn=said.append).exec("gpufleet-lab-2", "apt-mark", "showhold")
    assert result.returncode == 0 and result.stdout == "held\n"
    assert made == ["/sys/fs/cgroup/systemd/libpod_parent/libpod-4f87", "/sys/fs/cgroup/pids/libpod_parent/libpod-4f87"]
    assert calls == [["podman", "exec", "gpufleet-lab-2", "apt-mark", "showhold"]] * 3
    assert said == [f"podman exec gpufleet-lab-2: its cgroup directory {path} is gone; made it again" for path in made]


def test_exec_stops_when_the_made_directory_does_not_help_and_fails_with_runcs_words():
    runner, made, calls = cgroups_gone(still_gone=["systemd"])
    podman = Podman(runner, make_dir=made.append, warn=lambda line: None)
    with pytest.raises(PodmanError, match=r"podman exec gpufleet-lab-2 true failed: .*libpod-4f87/cgroup.procs: no such"):
        podman.exec("gpufleet-lab-2", "true")
    assert len(made) == 1 and len(calls) == 2
    assert podman.exec("gpufleet-lab-2", "true", check=False).returncode == 127


@pytest.mark.parametrize("stderr", [
    "Error: no container with name or ID \"gpufleet-lab-9\" found: no such container",
    "open /etc/cgroup.procs: no such file or directory",
    "openat2 /sys/fs/cgroup/systemd/../../etc/cgroup.procs: no such file or directory",
])
def test_exec_makes_no_directory_for_any_other_failure(stderr):
    made = []
    result = Podman(lambda argv: subprocess.CompletedProcess(argv, 125, "", stderr), make_dir=made.append,
                    warn=lambda line: None).exec("gpufleet-lab-9", "true", check=False)
    assert result.returncode == 125 and made == []


def test_exec_leaves_the_cgroups_of_a_command_that_succeeds_alone():
    made = []
    result = Podman(lambda argv: subprocess.CompletedProcess(argv, 0, GONE.format("systemd"), ""),
                    make_dir=made.append).exec("gpufleet-lab-2", "cat", "/var/log/runc.log")
    assert result.returncode == 0 and made == []
