"""The lab's orchestration, against a fake podman that records calls."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpufleet.lab import Lab, PodmanError, _ssh
from gpufleet.lab._podman import Podman


class FakePodman(Podman):
    def __init__(self, containers=None, images=("localhost/gpufleet-debian:12", "localhost/gpufleet-debian:13")):
        self.containers = dict(containers or {})
        self.gpu_stack = set()
        self.images = set(images)
        self.calls: list[tuple] = []

    def lab_containers(self):
        return dict(self.containers)

    def gpu_stack_containers(self):
        return set(self.gpu_stack)

    def image_exists(self, image):
        return image in self.images

    def run_node(self, node, image):
        self.calls.append(("run", node.name, node.endpoint, image))
        self.containers[node.name] = "running"
        if node.gpu_stack:
            self.gpu_stack.add(node.name)

    def start(self, name):
        self.calls.append(("start", name))
        self.containers[name] = "running"

    def remove(self, name):
        self.calls.append(("rm", name))
        self.containers.pop(name, None)
        self.gpu_stack.discard(name)

    def bridge_gateway(self):
        return "10.88.0.1"

    def exec(self, name, *argv, check=True, stdin=None):
        self.calls.append(("exec", name, argv[0]))
        out = {
            "systemctl": "running\n" if "is-system-running" in argv else "active\n",
            "cat": f"ssh-ed25519 KEY{name[-1]} root@x\n",
        }.get(argv[0], "")
        return subprocess.CompletedProcess(argv, 0, out, "")


class FakeEmulator:
    def __init__(self):
        self.seeded = None
        self.stopped = 0

    def start(self, lab_dir, root, nodes):
        self.seeded = [n.name for n in nodes]
        self.gpu_stack = [n.name for n in nodes if n.gpu_stack]
        self.spot = [n.name for n in nodes if n.spot]

    def stop(self, lab_dir):
        self.stopped += 1


class FakeObjectStore:
    def __init__(self):
        self.listening_on = None
        self.stopped = 0
        self.deleted = False

    def start(self, lab_dir, root, gateway):
        self.listening_on = gateway
        return 0

    def stop(self, lab_dir):
        self.stopped += 1

    def delete_data(self, lab_dir):
        self.deleted = True
        return True


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setattr(_ssh, "wait_for_banner", lambda node, timeout: None)
    return Lab(tmp_path / "lab", podman=FakePodman(), root=tmp_path, emulator=FakeEmulator(),
               object_store=FakeObjectStore())


def test_up_starts_missing_nodes_and_writes_known_hosts(lab):
    lab.up(count=2, log=lambda *_: None)
    runs = [c for c in lab.podman.calls if c[0] == "run"]
    assert runs == [
        ("run", "gpufleet-lab-1", "127.0.0.11:2201", "localhost/gpufleet-debian:12"),
        ("run", "gpufleet-lab-2", "127.0.0.12:2202", "localhost/gpufleet-debian:12"),
    ]
    assert lab.known_hosts.read_text().splitlines() == [
        "[127.0.0.11]:2201 ssh-ed25519 KEY1",
        "[127.0.0.12]:2202 ssh-ed25519 KEY2",
    ]
    state = json.loads(lab.state_file.read_text())
    assert [n["address"] for n in state["nodes"]] == ["127.0.0.11", "127.0.0.12"]
    assert lab.emulator.seeded == ["gpufleet-lab-1", "gpufleet-lab-2"]
    # The nodes' object store listens on the host side of their network only.
    assert lab.object_store.listening_on == "10.88.0.1"


def test_up_again_creates_nothing_and_restarts_stopped_nodes(lab):
    lab.up(count=2, log=lambda *_: None)
    lab.podman.containers["gpufleet-lab-2"] = "exited"
    lab.podman.calls.clear()
    lab.up(count=2, log=lambda *_: None)
    assert [c for c in lab.podman.calls if c[0] in ("run", "rm", "start")] == [("start", "gpufleet-lab-2")]


def test_up_with_fewer_nodes_removes_the_extra_ones(lab):
    lab.up(count=3, log=lambda *_: None)
    lab.podman.calls.clear()
    lab.up(count=1, log=lambda *_: None)
    assert sorted(c for c in lab.podman.calls if c[0] == "rm") == [("rm", "gpufleet-lab-2"), ("rm", "gpufleet-lab-3")]


def test_gpu_stack_nodes_are_the_first_ones_on_debian_13(lab):
    lab.up(count=3, gpu_stack=1, log=lambda *_: None)
    runs = [c for c in lab.podman.calls if c[0] == "run"]
    assert [(c[1], c[3]) for c in runs] == [
        ("gpufleet-lab-1", "localhost/gpufleet-debian:13"),
        ("gpufleet-lab-2", "localhost/gpufleet-debian:12"),
        ("gpufleet-lab-3", "localhost/gpufleet-debian:12"),
    ]
    assert lab.emulator.gpu_stack == ["gpufleet-lab-1"]
    state = json.loads(lab.state_file.read_text())
    assert [n["gpu_stack"] for n in state["nodes"]] == [True, False, False]


def test_a_larger_lab_keeps_every_node_and_adds_a_spot_node(lab):
    lab.up(count=2, gpu_stack=1, log=lambda *_: None)
    lab.podman.calls.clear()
    lab.up(count=3, gpu_stack=1, spot=1, log=lambda *_: None)
    # The GPU-stack node and the plain node stay as they are: only the new
    # node is made, and only the lab's cloud knows it as spot.
    assert [c[:2] for c in lab.podman.calls if c[0] in ("run", "rm", "start")] == [("run", "gpufleet-lab-3")]
    assert lab.emulator.gpu_stack == ["gpufleet-lab-1"] and lab.emulator.spot == ["gpufleet-lab-3"]
    state = json.loads(lab.state_file.read_text())
    assert [n["spot"] for n in state["nodes"]] == [False, False, True]
    # Back to the smaller lab: the spot node goes, the others stay.
    lab.podman.calls.clear()
    lab.up(count=2, gpu_stack=1, log=lambda *_: None)
    assert [c[:2] for c in lab.podman.calls if c[0] in ("run", "rm", "start")] == [("rm", "gpufleet-lab-3")]
    assert lab.emulator.spot == []


def test_a_node_made_for_the_other_role_is_made_again(lab):
    lab.up(count=3, log=lambda *_: None)
    lab.podman.calls.clear()
    lab.up(count=3, gpu_stack=1, log=lambda *_: None)
    assert [c[:2] for c in lab.podman.calls if c[0] in ("run", "rm", "start")] == [
        ("rm", "gpufleet-lab-1"), ("run", "gpufleet-lab-1")]
    lab.podman.calls.clear()
    lab.up(count=3, gpu_stack=1, log=lambda *_: None)
    assert [c for c in lab.podman.calls if c[0] in ("run", "rm", "start")] == []
    lab.up(count=3, log=lambda *_: None)
    assert lab.podman.gpu_stack == set()


def test_up_rejects_more_gpu_stack_nodes_than_nodes_before_touching_anything(lab):
    with pytest.raises(ValueError, match="gpu_stack: .* between 0 and the node count 2, got 3"):
        lab.up(count=2, gpu_stack=3, log=lambda *_: None)
    with pytest.raises(ValueError, match="spot: .* between 0 and the node count 2, got 3"):
        lab.up(count=2, spot=3, log=lambda *_: None)
    assert lab.podman.calls == []


def test_gpu_stack_nodes_need_the_debian_13_image(lab):
    lab.podman.images.discard("localhost/gpufleet-debian:13")
    lab.up(count=2, log=lambda *_: None)
    lab.podman.calls.clear()
    with pytest.raises(PodmanError, match="localhost/gpufleet-debian:13 is missing"):
        lab.up(count=2, gpu_stack=1, log=lambda *_: None)
    assert lab.podman.calls == []


def test_up_fails_before_touching_anything_without_the_image(lab):
    lab.podman.images.clear()
    with pytest.raises(PodmanError, match="localhost/gpufleet-debian:12 is missing"):
        lab.up(count=1, log=lambda *_: None)
    assert lab.podman.calls == []


def test_up_rejects_a_bad_count_before_touching_anything(lab):
    with pytest.raises(ValueError, match="nodes: must be between"):
        lab.up(count=0, log=lambda *_: None)
    assert lab.podman.calls == []


def test_down_removes_every_node_and_the_state(lab):
    lab.up(count=2, log=lambda *_: None)
    assert lab.down(log=lambda *_: None) == 2
    assert lab.podman.containers == {}
    assert not lab.known_hosts.exists()
    assert not lab.state_file.exists()
    assert (lab.dir / "id_ed25519").exists(), "the key survives, so it stays stable across labs"
    assert lab.emulator.stopped == 1 and lab.object_store.stopped == 1
    assert lab.object_store.deleted, "only lab down deletes the object store's data"


def test_a_node_that_cannot_be_removed_still_stops_the_servers_and_keeps_the_data(lab, monkeypatch):
    lab.up(count=2, log=lambda *_: None)
    real_remove = lab.podman.remove

    def remove(name):
        if name.endswith("-1"):
            raise PodmanError(f"podman rm --force {name} failed 3 times: container state improper")
        real_remove(name)

    monkeypatch.setattr(lab.podman, "remove", remove)
    with pytest.raises(PodmanError, match="gpufleet-lab-1 failed 3 times.*run `gpufleet lab down` again"):
        lab.down(log=lambda *_: None)
    assert list(lab.podman.containers) == ["gpufleet-lab-1"], "the other node is removed"
    assert lab.emulator.stopped == 1 and lab.object_store.stopped == 1
    assert not lab.object_store.deleted and lab.state_file.exists()
    monkeypatch.setattr(lab.podman, "remove", real_remove)
    assert lab.down(log=lambda *_: None) == 1
    assert lab.object_store.deleted


def test_up_writes_the_lab_inventory_from_the_collection_and_down_removes_it(lab, capsys):
    source = Path(__file__).resolve().parents[4] / "inventories" / "lab"
    lab.inventory_source = source
    lab.up(count=1)
    inventory = lab.dir / "inventory"
    assert (inventory / "aliyun_ecs.yml").read_text() == (source / "aliyun_ecs.yml").read_text()
    override = inventory / "group_vars" / "lab" / "zz-gpufleet-lab-dir.yml"
    assert f"gpufleet_lab_dir: {lab.dir.resolve()}" in override.read_text()
    assert f"inventory {inventory}" in capsys.readouterr().out
    lab.down(log=lambda *_: None)
    assert not inventory.exists()


CGROUP_GONE = ("Error: runc: exec failed: unable to start container process: error adding pid 4799 to cgroups: "
               "failed to write 4799: openat2 /sys/fs/cgroup/systemd/libpod_parent/libpod-4f87/cgroup.procs: "
               "no such file or directory: OCI runtime attempted to invoke a command that was not found")


class CgroupGonePodman(FakePodman):
    """A node podman has as running, into which no command runs until it is
    run again (what CI saw after a node was stopped and started)."""

    def __init__(self, broken, **kwargs):
        super().__init__(**kwargs)
        self.broken = set(broken)

    def restart(self, name):
        self.calls.append(("restart", name))
        self.broken.discard(name)

    def exec(self, name, *argv, check=True, stdin=None):
        if name in self.broken:
            self.calls.append(("exec", name, argv[0]))
            if check:
                raise PodmanError(f"podman exec {name} {argv[0]} failed: {CGROUP_GONE}")
            return subprocess.CompletedProcess(argv, 127, "", CGROUP_GONE + "\n")
        return super().exec(name, *argv, check=check, stdin=stdin)


def test_a_running_node_that_runs_no_command_is_run_again_once_and_keeps_its_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(_ssh, "wait_for_banner", lambda node, timeout: None)
    podman = CgroupGonePodman({"gpufleet-lab-2"}, containers={"gpufleet-lab-1": "running", "gpufleet-lab-2": "running"})
    lab = Lab(tmp_path / "lab", podman=podman, root=tmp_path, emulator=FakeEmulator(), object_store=FakeObjectStore())
    said = []
    lab.up(count=2, log=said.append)
    # Restarted (its disk kept), never removed or made again, and said so with why.
    assert [c for c in podman.calls if c[0] in ("run", "rm", "start", "restart")] == [("restart", "gpufleet-lab-2")]
    assert [line for line in said if line.startswith("restarting gpufleet-lab-2: podman cannot run commands in it (")]
    assert "error adding pid 4799 to cgroups" in next(line for line in said if line.startswith("restarting"))
    assert lab.known_hosts.read_text().splitlines()[1] == "[127.0.0.12]:2202 ssh-ed25519 KEY2"


def test_a_node_still_broken_after_its_restart_fails_by_name_with_why(tmp_path, monkeypatch):
    monkeypatch.setattr(_ssh, "wait_for_banner", lambda node, timeout: None)

    class StaysBroken(CgroupGonePodman):
        def restart(self, name):
            self.calls.append(("restart", name))

    podman = StaysBroken({"gpufleet-lab-1"}, containers={"gpufleet-lab-1": "running"})
    lab = Lab(tmp_path / "lab", podman=podman, root=tmp_path, emulator=FakeEmulator(), object_store=FakeObjectStore())
    with pytest.raises(TimeoutError, match=r"gpufleet-lab-1: not booted with sshd active after 1s .*error adding pid"):
        lab.up(count=1, boot_timeout=1.0, log=lambda *_: None)
    # One restart, not one per probe.
    assert [c for c in podman.calls if c[0] == "restart"] == [("restart", "gpufleet-lab-1")]


def test_podman_restart_stops_cleans_up_then_starts():
    calls = []

    def runner(argv):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    Podman(runner).restart("gpufleet-lab-2")
    assert calls == [["podman", "stop", "--time", "2", "gpufleet-lab-2"],
                     ["podman", "container", "cleanup", "gpufleet-lab-2"],
                     ["podman", "start", "gpufleet-lab-2"]]
