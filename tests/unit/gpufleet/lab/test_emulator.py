"""The lab's Alibaba Cloud emulator: its seed, a real start and stop."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import yaml

from gpufleet.lab import _emulator, _nodes
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[4]


def test_seed_lists_each_node_as_a_running_gpu_instance_at_its_loopback_address():
    data = _emulator.seed(_nodes.plan(2))
    assert data["regions"] == ["cn-hangzhou"]
    first = data["instances"][0]
    assert first["private_ip"] == "127.0.0.11" and first["name"] == "lab-node-1"
    assert first["tags"] == {"gpufleet-lab": "true", "ssh_port": "2201"}
    assert first["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert len({i["instance_id"] for i in data["instances"]}) == 2


def test_seed_tags_the_gpu_stack_nodes_for_the_inventory():
    data = _emulator.seed(_nodes.plan(3, gpu_stack=1))
    assert [i["tags"].get("gpufleet-lab-gpu-stack") for i in data["instances"]] == ["true", None, None]


def test_seed_lists_the_spot_nodes_as_spot_instances():
    data = _emulator.seed(_nodes.plan(3, gpu_stack=1, spot=1))
    assert [i["charge"] for i in data["instances"]] == ["on_demand", "on_demand", "spot"]


def test_start_serves_the_seed_and_stop_ends_the_process(tmp_path):
    port = free_port()
    _emulator.start(tmp_path, ROOT, _nodes.plan(1), port=port)
    try:
        assert yaml.safe_load((tmp_path / "aliyun-seed.yml").read_text())["instances"][0]["name"] == "lab-node-1"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        assert _emulator.stop(tmp_path) is True
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert _emulator.stop(tmp_path) is False, "stopping twice is harmless"


def test_start_refuses_a_port_that_is_taken(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(RuntimeError, match="is taken by another process"):
            _emulator.start(tmp_path, ROOT, _nodes.plan(1), port=busy.getsockname()[1])


def test_runs_from_the_package_in_any_working_directory(tmp_path):
    # The emulator is the package's (python -m gpufleet.lab._cloud.aliyun),
    # so an installed CLI starts it far from any checkout's tests/.
    port = free_port()
    _emulator.start(tmp_path, tmp_path, _nodes.plan(1), port=port)
    try:
        # It prints this line just after it starts listening, which is what
        # start() waits for: wait for the line too, with a deadline.
        line = "aliyun emulator listening on http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 10
        while line not in (tmp_path / "emulator.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert line in (tmp_path / "emulator.log").read_text()
    finally:
        _emulator.stop(tmp_path)
