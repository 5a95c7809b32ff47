"""The Alibaba Cloud emulator as a process of its own, seeded from a file,
as the lab uses it: lab nodes as GPU instances whose private addresses are
loopback addresses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.integration.inventory.cli import ansible_inventory, plain
from tests.support.nodes import ROOT, ansible_env

pytestmark = pytest.mark.inventory

SEED = {
    "regions": ["cn-hangzhou"],
    "instances": [
        {"region": "cn-hangzhou", "instance_type": "ecs.gn7i-c8g1.2xlarge", "instance_id": "i-lab%d" % n,
         "name": "lab-node-%d" % n, "private_ip": "127.0.0.%d" % (10 + n), "tags": {"ssh_port": str(2200 + n)}}
        for n in (1, 2)
    ],
}


@pytest.fixture
def emulator_process(tmp_path):
    seed = tmp_path / "seed.yml"
    seed.write_text(yaml.safe_dump(SEED))
    port_file = tmp_path / "port"
    process = subprocess.Popen([sys.executable, "-m", "gpufleet.lab._cloud.aliyun", "--seed", str(seed),
                                "--port-file", str(port_file)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert process.poll() is None, "the emulator exited"
            assert time.monotonic() < deadline, "the emulator did not start"
            time.sleep(0.1)
        yield int(port_file.read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_the_lab_seed_is_listed_with_its_ssh_endpoints(emulator_process, tmp_path):
    config = tmp_path / "lab.aliyun_ecs.yml"
    config.write_text(yaml.safe_dump({
        "plugin": "gpufleet.cloud.aliyun_ecs", "regions": ["cn-hangzhou"],
        "endpoint": "http://127.0.0.1:%d" % emulator_process, "hostnames": ["name"],
        "compose": {"ansible_host": "gpufleet_private_ip", "ansible_port": "gpufleet_tags.ssh_port | int"},
    }))
    env = ansible_env()
    env.update({"ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI-lab", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "lab-secret",
                "ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true"})
    run = ansible_inventory(env, "-i", str(config), "--list")
    assert run.returncode == 0, run.stderr
    hostvars = plain(json.loads(run.stdout)["_meta"]["hostvars"])
    assert sorted(hostvars) == ["lab-node-1", "lab-node-2"]
    assert (hostvars["lab-node-2"]["ansible_host"], hostvars["lab-node-2"]["ansible_port"]) == ("127.0.0.12", 2202)
    assert hostvars["lab-node-1"]["gpufleet_gpu"] == {"model": "A10", "count": 1, "memory_mib": 24576}
