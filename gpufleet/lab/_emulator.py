"""The lab's cloud: the Alibaba Cloud ECS emulator (_cloud/aliyun.py, in the
package so an installed gpufleet has it), run as a background process on
loopback, seeded with the lab nodes as GPU instances whose private IPs are
the nodes' loopback addresses. The lab inventory then finds the nodes
through the real gpufleet.cloud.aliyun_ecs plugin and the official SDK,
exactly as it would find a real account's."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from . import _process
from ._nodes import Node

PORT = 18281  # inventories/lab/aliyun_ecs.yml points here
REGION = "cn-hangzhou"
# A real single-A10 ECS type: the lab's GPU is emulated, the nodes have none.
INSTANCE_TYPE = "ecs.gn7i-c8g1.2xlarge"


def seed(nodes: list[Node]) -> dict:
    return {
        "regions": [REGION],
        "instances": [
            {
                "region": REGION,
                "instance_type": INSTANCE_TYPE,
                "instance_id": f"i-lab{n.index:04d}",
                "name": n.hostname,
                "private_ip": n.address,
                "state": "running",
                "charge": "spot" if n.spot else "on_demand",
                "tags": {"gpufleet-lab": "true", "ssh_port": str(n.port),
                         # inventories/lab puts these nodes in lab_gpu_stack.
                         **({"gpufleet-lab-gpu-stack": "true"} if n.gpu_stack else {})},
            }
            for n in nodes
        ],
    }


def stop(lab_dir: Path) -> bool:
    """Stop the emulator this lab started; True if one was running."""
    return _process.stop(lab_dir, "emulator")


def start(lab_dir: Path, root: Path, nodes: list[Node], port: int = PORT) -> None:
    """(Re)start the emulator with a seed for exactly these nodes."""
    seed_file = lab_dir / "aliyun-seed.yml"
    seed_file.write_text(yaml.safe_dump(seed(nodes), sort_keys=False))
    argv = [sys.executable, "-m", "gpufleet.lab._cloud.aliyun", "--port", str(port), "--seed", str(seed_file)]
    _process.start(lab_dir, root, "emulator", argv, "127.0.0.1", port, "emulator")
