"""The lab's SSH material: a key made for the lab, and a known_hosts file
filled from each node's real host key, so Ansible connects with strict host
key checking instead of turning it off."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from ._nodes import Node


def ensure_key(lab_dir: Path) -> Path:
    """Create the lab's ed25519 key pair once; return the private key path."""
    key = lab_dir / "id_ed25519"
    if not key.exists():
        lab_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-lab", "-f", str(key)],
            check=True,
        )
    key.chmod(0o600)
    return key


def known_hosts_line(node: Node, host_key: str) -> str:
    """A known_hosts entry for a node reached on a non-standard port."""
    parts = host_key.split()
    if len(parts) < 2 or not parts[0].startswith("ssh-"):
        raise ValueError(f"{node.name}: not an SSH public host key: {host_key!r}")
    return f"[{node.address}]:{node.port} {parts[0]} {parts[1]}"


def wait_for_banner(node: Node, timeout: float = 60.0) -> None:
    """Wait until sshd answers with its banner on the node's endpoint."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((node.address, node.port), timeout=2) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-"):
                    return
                last = "no SSH banner"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.5)
    raise TimeoutError(f"{node.name}: sshd did not answer on {node.endpoint} within {timeout:.0f}s ({last})")
