"""Podman test nodes and the ansible-playbook runs that drive them (the
lab tests, Molecule's helpers and the benchmarks): the project's
ansible.cfg, Mitogen's podman connection, the recap read back."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gpufleet.lab._podman import Podman, missing_cgroup_dir

ROOT = Path(__file__).resolve().parents[2]
# The connection to podman nodes. Under the project's ansible.cfg (strategy
# gpufleet.cloud.mitogen_linear) the short name `podman` is Mitogen's podman
# connection: one Python interpreter per node for the whole run, instead of
# a `podman exec` and a file copy for every task, which containers.podman's
# plugin costs (about 2.5x the time for the bad-input runs).
PODMAN_CONNECTION = "podman"
# The interpreter of every podman test node, named instead of discovered:
# over a podman connection Mitogen discovers it again for every task, and
# tries python3.13 and python3.12 first, each a failed `podman exec` on
# Debian 12 (docs/testing.md, "What a podman node costs"). Implicit
# localhost keeps the controller's interpreter.
PODMAN_PYTHON = "/usr/bin/python3"
PODMAN_ENV = {"ANSIBLE_PYTHON_INTERPRETER": PODMAN_PYTHON}
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def run_playbook(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """ansible-playbook from the venv that runs these tests; `env` adds to
    or overrides ansible_env() (and PODMAN_ENV, for a run with `-c podman`)."""
    exe = shutil.which("ansible-playbook")
    assert exe, "ansible-playbook is not on PATH"
    podman = any(flag == "-c" and value == PODMAN_CONNECTION for flag, value in zip(args, args[1:]))
    base = {**ansible_env(), **(PODMAN_ENV if podman else {})}
    result = subprocess.run([exe, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                            check=False)
    # A node whose cgroup directory vanished (docs/testing.md, "Test
    # nodes") takes no `podman exec`, so a connection to it fails. Where
    # that was before any task ran on any node, the run changed nothing and
    # runs again once the directory is made again.
    missing = missing_cgroup_dir(result.stdout + result.stderr) if podman and result.returncode != 0 else None
    ran = [s["ok"] + s["changed"] + s["failed"] for s in recap(result.stdout).values()]
    if missing and ran and not any(ran):
        print(f"ansible-playbook over podman: the cgroup directory {missing} is gone; made it again, running again",
              file=sys.stderr)
        os.makedirs(missing, exist_ok=True)
        result = subprocess.run([exe, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True, text=True,
                                check=False)
    return result


def recap(output: str) -> dict[str, dict[str, int]]:
    return {
        m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
        for m in RECAP.findall(output)
    }


def node_exec(name: str, *argv: str) -> subprocess.CompletedProcess:
    """`podman exec`, through the lab's, which makes a node's cgroup
    directory again where it is gone."""
    return Podman().exec(name, *argv, check=False)


@contextlib.contextmanager
def booted_node(name: str, image: str, *podman_args: str):
    """A node named `name` from `image` (systemd as init), started with
    extra `podman run` arguments, once its systemd has finished booting;
    removed afterwards, whatever happened. Yields its name."""
    subprocess.run(["podman", "run", "-d", "--name", name, *podman_args, image, "/sbin/init"], check=True,
                   capture_output=True)
    try:
        subprocess.run(["podman", "exec", name, "systemctl", "is-system-running", "--wait"], check=False,
                       capture_output=True)
        yield name
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "2", name], check=False, capture_output=True)


def node_has_package(name: str, package: str) -> bool:
    status = node_exec(name, "dpkg-query", "-W", "-f", "${Status}", package).stdout
    return "installed" in status.split()


def node_has_path(name: str, path: str) -> bool:
    return node_exec(name, "test", "-e", path).returncode == 0


ROLE_PLAYBOOK = """
- hosts: all
  gather_facts: true
  roles:
    - {role}
"""


def roles_play(roles: str | list[str]) -> str:
    """ROLE_PLAYBOOK for one role, or for each of a list of roles in order."""
    return ROLE_PLAYBOOK.format(role=roles if isinstance(roles, str) else "\n    - ".join(roles))


def run_roles(node: str, workdir: Path, roles: list[str], extra_vars: dict, *, check: bool = False,
              diff: bool = False) -> subprocess.CompletedProcess:
    """One play of `roles` on `node` with `extra_vars` (facts gathered);
    the finished run."""
    path = workdir / "play.yml"
    path.write_text(roles_play(roles))
    flags = (["--check"] if check else []) + (["--diff"] if diff else [])
    return run_playbook(*flags, "-i", f"{node},", "-c", PODMAN_CONNECTION, "-e", json.dumps(extra_vars), str(path))
