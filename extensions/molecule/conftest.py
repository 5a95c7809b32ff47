"""Shared testinfra helpers for every Molecule scenario.

Pytest loads this file for any test under extensions/molecule/, so each
scenario's tests/ only holds the checks of its own role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# The project's own test helpers (tests/support/prometheus.py) for scenario tests:
# pytest puts only this folder and each scenario's tests/ on the path.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# pylint: disable-next=wrong-import-position
from tests.support import testinfra_podman  # noqa: E402

# Every podman:// host of a scenario's checks: one `podman exec` per node.
testinfra_podman.use()


def debian_major(host) -> int:
    """Debian major version of the node, from /etc/debian_version."""
    return int(host.file("/etc/debian_version").content_string.strip().split(".")[0])


def assert_package(host, name: str) -> str:
    """Assert a package is installed and return its version."""
    pkg = host.package(name)
    assert pkg.is_installed, f"{name} is not installed on {host.backend.hostname}"
    return pkg.version


def assert_file(host, path: str, *, mode: int = 0o644, owner: str = "root", group: str = "root", contains=()):
    """Assert a regular file exists with the given owner, group and mode, and
    that it contains every given string. Returns its content."""
    f = host.file(path)
    assert f.exists, f"{path} is missing"
    assert f.is_file, f"{path} is not a regular file"
    assert f.user == owner, f"{path} is owned by {f.user}, not {owner}"
    assert f.group == group, f"{path} has group {f.group}, not {group}"
    assert f.mode == mode, f"{path} has mode {oct(f.mode)}, not {oct(mode)}"
    content = f.content_string
    for needle in contains:
        assert needle in content, f"{path} lacks {needle!r}"
    return content


def assert_unit_running(host, unit: str):
    """Assert a systemd unit is enabled and active."""
    svc = host.service(unit)
    assert svc.is_enabled, f"{unit} is not enabled"
    assert svc.is_running, f"{unit} is not running"


def assert_dropin_moved_aside(host, unit: str, name: str, setting: str, kept=()):
    """A drop-in the scenario's prepare.yml left for `unit`, setting
    `setting`: moved aside by the converge (gpufleet.cloud.unit_dropins),
    kept beside as NAME.gpufleet-disabled, and no longer read by systemd,
    which reads exactly the drop-ins named in `kept` (in the same directory)."""
    dropins = f"/etc/systemd/system/{unit}.d"
    assert not host.file(f"{dropins}/{name}").exists
    assert host.file(f"{dropins}/{name}.gpufleet-disabled").contains(setting)
    read = host.check_output(f"systemctl show -p DropInPaths --value {unit}").split()
    assert sorted(read) == sorted(f"{dropins}/{k}" for k in kept), read
    assert setting not in host.check_output(f"systemctl cat {unit}")


@pytest.fixture
def major(host) -> int:
    return debian_major(host)


def project_dir() -> Path:
    """The checkout Molecule runs from."""
    return Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or Path(__file__).resolve().parents[2])


def container(major_version: int) -> str:
    """Name of this scenario's node for a Debian major version."""
    return f"{os.environ['MOLECULE_SCENARIO_NAME']}-debian{major_version}"


@pytest.fixture(scope="module")
def rerun_node():
    """The scenario's Debian 13 node, for the tests that run the role again
    through ansible-playbook (10 to 40 s a run). A test that takes this in
    place of `host` runs once, not once per node: what it proves (a refused
    change is never written, live state that differs is drift, a run repairs
    it) is the role's own logic, the same on both releases, and the checks of
    each node's converged state still run on both (docs/testing.md)."""
    import testinfra  # pylint: disable=import-outside-toplevel

    return testinfra.get_host(f"podman://{container(13)}")


def ansible_playbook(playbook: Path, *nodes: str, extra_vars: dict | None = None,
                     options: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run a playbook of this checkout against scenario nodes, the way a user
    would: with the project's ansible.cfg and the scenario's own inventory,
    so the nodes keep the variables they were converged with."""
    root = project_dir()
    inventory = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    env = dict(os.environ, ANSIBLE_CONFIG=str(root / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    # localhost too: the project's playbooks write their reports from it.
    limit = ",".join([*nodes, "localhost"])
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), "--limit", limit]
    argv += ["-e", json.dumps(extra_vars or {}), *options, str(playbook)]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)


def prometheus_tool(name: str) -> str:
    """prometheus or promtool from Debian's package, unpacked by
    tools/prometheus-tools.sh (`make deps`). Missing is a broken setup."""
    path = project_dir() / ".cache" / "tools" / "prometheus" / name
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run tools/prometheus-tools.sh (part of `make deps`)")
    return str(path)
