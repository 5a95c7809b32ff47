"""The lab's cloud: the Alibaba Cloud ECS emulator (tests/emulators/aliyun.py)
run as a background process on loopback, seeded with the lab nodes as GPU
instances whose private IPs are the nodes' loopback addresses. The lab
inventory then finds the nodes through the real gpufleet.cloud.aliyun_ecs
plugin and the official SDK, exactly as it would find a real account's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

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
                "charge": "on_demand",
                "tags": {"gpufleet-lab": "true", "ssh_port": str(n.port)},
            }
            for n in nodes
        ],
    }


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def stop(lab_dir: Path) -> bool:
    """Stop the emulator this lab started; True if one was running."""
    pid_file = lab_dir / "emulator.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().strip() or 0)
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    for _attempt in range(50):
        if not _alive(pid):
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)  # it ignored SIGTERM for 5 s
    return True


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent to reap it."""
    try:
        # Reap it if it is our own child (the CLI that started it, or a test).
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # started by an earlier `gpufleet lab up`: not ours to reap
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def start(lab_dir: Path, root: Path, nodes: list[Node], port: int = PORT) -> None:
    """(Re)start the emulator with a seed for exactly these nodes."""
    stop(lab_dir)
    if _listening(port):
        raise RuntimeError(f"127.0.0.1:{port} is taken by another process; the lab's emulator needs it")
    seed_file = lab_dir / "aliyun-seed.yml"
    seed_file.write_text(yaml.safe_dump(seed(nodes), sort_keys=False))
    log = (lab_dir / "emulator.log").open("w")
    # The emulator outlives this call by design: no `with`.
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-m", "tests.emulators.aliyun", "--port", str(port), "--seed", str(seed_file)],
        cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    (lab_dir / "emulator.pid").write_text(f"{proc.pid}\n")
    for _attempt in range(100):
        if proc.poll() is not None:
            raise RuntimeError(f"the lab's emulator exited: see {lab_dir / 'emulator.log'}")
        if _listening(port):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the lab's emulator did not listen on 127.0.0.1:{port}")
