"""Helpers for tests that drive real nodes: podman containers reached by
ansible-playbook. They need podman and the base images (`make images`)."""

from __future__ import annotations

import json
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


ROLE_PLAY = """
- hosts: all
  gather_facts: true
  roles:
    - {role}
"""


def run_role(node: str, role: str, extra_vars: dict, workdir: Path) -> subprocess.CompletedProcess:
    """Apply one role to a podman node with the given extra variables."""
    playbook = workdir / "play.yml"
    playbook.write_text(ROLE_PLAY.format(role=role))
    return run_playbook("-i", f"{node},", "-c", "containers.podman.podman", "-e", json.dumps(extra_vars), str(playbook))


def assert_refused_before_any_change(result: subprocess.CompletedProcess, node: str, variable: str) -> str:
    """The run failed, its message names the variable, and no task changed
    anything. Returns the run's output."""
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert variable in out, f"the error does not name {variable}:\n{out}"
    stats = recap(result.stdout)[node]
    assert stats["failed"] == 1 and stats["changed"] == 0, out
    return out


def package_installed(node: str, package: str) -> bool:
    status = node_exec(node, "dpkg-query", "-W", "-f", "${Status}", package).stdout
    return "installed" in status.split()


def assert_bad_input_refused(node: str, role: str, bad: tuple[dict, str], workdir: Path, *, paths=(), packages=()):
    """Apply `role` with bad variables (`bad` is the variables and the name
    the error must give): the run fails in preflight, names the variable,
    changes nothing, and none of `paths` or `packages` exists on the node."""
    extra_vars, variable = bad
    assert_refused_before_any_change(run_role(node, role, extra_vars, workdir), node, variable)
    for path in paths:
        assert node_exec(node, "test", "-e", path).returncode == 1, f"{path} exists on {node}"
    for package in packages:
        assert not package_installed(node, package), f"{package} is installed on {node}"
