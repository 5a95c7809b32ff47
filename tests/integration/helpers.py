"""Helpers for tests that drive real nodes: podman containers reached by
ansible-playbook. They need podman and the base images (`make images`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def run_playbook(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """ansible-playbook from the venv that runs these tests."""
    exe = shutil.which("ansible-playbook")
    assert exe, "ansible-playbook is not on PATH"
    return subprocess.run([exe, *args], cwd=cwd, env=ansible_env(), capture_output=True, text=True, check=False)


def recap(output: str) -> dict[str, dict[str, int]]:
    return {
        m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
        for m in RECAP.findall(output)
    }


def node_exec(name: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", name, *argv], capture_output=True, text=True, check=False)


def gpufleet(*args: str) -> subprocess.CompletedProcess:
    """The gpufleet command from the venv that runs these tests."""
    exe = shutil.which("gpufleet")
    assert exe, "the gpufleet command is not installed in this environment"
    return subprocess.run([exe, *args], cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False)
