"""The CLI without a checkout: the collection built and installed from its
tarball, the CLI installed from its sources, both into a temporary
directory, then `gpufleet lab up -n 1` and `gpufleet drift` run from a
working directory outside the checkout, as a user who installed both would.

The collection is installed with --no-deps: Galaxy is unreachable from our
machines, and its dependencies (ansible.posix, community.general) are the
pinned ones `make collections` unpacked into the checkout's .collections,
which ANSIBLE_COLLECTIONS_PATH names after the installed collection.
gpufleet.cloud itself is then only on the installed path.

This lab has the shared fleet's container names and ports (gpufleet-lab-1,
127.0.0.11:2201, the emulator's 18281), so it runs in the lab-fleet stage's
process, before the shared fleet exists: tests/integration/conftest.py puts
this module first, and its lab is down before the next module starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import _unavailable
from tests.support.nodes import ROOT, ansible_env

pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("lab-fleet")]

# Bounds on each command, so a hang fails the test instead of the CI job.
QUICK_S, LAB_S, SCAN_S = 120, 300, 600
NODE = "lab-node-1"


def _check(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The collection and the CLI installed into a temporary directory, and
    the environment that uses them and nothing of the checkout's but the
    collection's dependencies."""
    tmp = tmp_path_factory.mktemp("installed-cli")
    collections = tmp / "collections"
    lib = tmp / "lib"
    # The checkout's ansible.cfg must not apply, even to ansible-galaxy:
    # its collections path holds the checkout as gpufleet.cloud, and the
    # install would find it "already installed" and do nothing.
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "GPUFLEET_LAB_DIR", "PYTHONPATH")}
    env.update({
        # Before site-packages, where the checkout's editable install is.
        "PYTHONPATH": str(lib),
        "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(collections), str(ROOT / ".collections")]),
        # The lab directory's documented default outside a checkout,
        # $XDG_DATA_HOME/gpufleet/lab, kept inside this test's directory.
        "XDG_DATA_HOME": str(tmp / "share"),
        "ANSIBLE_NOCOLOR": "1",
    })
    # The venv's that runs these tests, on PATH or not.
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    assert galaxy.is_file(), f"{galaxy} is missing: ansible-core is not installed in this venv (make venv)"
    _check(subprocess.run([str(galaxy), "collection", "build", "--output-path", str(tmp), str(ROOT)], cwd=tmp,
                          env=env, capture_output=True, text=True, timeout=QUICK_S, check=False), "collection build")
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    tarball = tmp / f"gpufleet-cloud-{version}.tar.gz"
    assert tarball.is_file(), sorted(p.name for p in tmp.iterdir())
    _check(subprocess.run([str(galaxy), "collection", "install", "--no-deps", "-p", str(collections), str(tarball)],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=QUICK_S, check=False),
           "collection install")
    collection = collections / "ansible_collections" / "gpufleet" / "cloud"
    assert (collection / "MANIFEST.json").is_file(), f"ansible-galaxy installed nothing into {collections}"

    # The CLI from a copy of its sources: a build in the checkout would
    # leave build/ and gpufleet.egg-info behind there. The copy must be
    # named by its absolute path: setuptools' wheel build failed on a
    # relative one (AttributeError in bdist_wheel).
    src = tmp / "cli-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "COPYING"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "gpufleet", src / "gpufleet", ignore=shutil.ignore_patterns("__pycache__"))
    _check(subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(lib),
                           str(src.resolve())], capture_output=True, text=True, timeout=QUICK_S, check=False),
           "pip install --target")

    cwd = tmp / "work"
    cwd.mkdir()
    return types.SimpleNamespace(
        tmp=tmp, lib=lib, collection=collection,
        cli=lib / "bin" / "gpufleet", env=env, cwd=cwd, lab_dir=tmp / "share" / "gpufleet" / "lab",
    )


def run(installed, *args: str, timeout: float = QUICK_S) -> subprocess.CompletedProcess:
    """The installed gpufleet, from the working directory outside the checkout."""
    return subprocess.run([str(installed.cli), *args], cwd=installed.cwd, env=installed.env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed_lab(installed):
    """`gpufleet lab up -n 1` by the installed CLI; its lab down afterwards."""
    # A checkout's lab holds the same container names and ports: down, so
    # this lab starts fresh (the node unconverged) and its emulator's port
    # is free.
    _check(subprocess.run([sys.executable, "-m", "gpufleet", "lab", "down"], cwd=ROOT, env=ansible_env(),
                          capture_output=True, text=True, timeout=LAB_S, check=False),
           "the checkout's gpufleet lab down")
    up = run(installed, "lab", "up", "-n", "1", timeout=LAB_S)
    try:
        if up.returncode != 0 and "is missing" in up.stderr:
            _unavailable(up.stderr)
        yield up
    finally:
        _check(run(installed, "lab", "down", timeout=LAB_S), "the installed gpufleet lab down")


def test_the_installed_cli_and_package_are_the_ones_that_run(installed):
    version = _check(run(installed, "--version"), "gpufleet --version")
    assert version.stdout.strip().endswith(f"from {installed.lib / 'gpufleet'}"), version.stdout
    # What the lab's servers import, from where they run (the lab dir).
    installed.lab_dir.mkdir(parents=True, exist_ok=True)
    where = _check(subprocess.run(
        [sys.executable, "-c", "import gpufleet.lab._cloud.aliyun as m, gpufleet.lab._object_store_server as s; "
                               "print(m.__file__); print(s.__file__)"],
        cwd=installed.lab_dir, env=installed.env, capture_output=True, text=True, timeout=QUICK_S, check=False,
    ), "import the lab's servers")
    for path in where.stdout.split():
        assert Path(path).is_relative_to(installed.lib), where.stdout


def test_lab_up_from_the_installed_cli_reaches_its_node(installed, installed_lab):
    assert installed_lab.returncode == 0, installed_lab.stdout + installed_lab.stderr
    inventory = installed.lab_dir / "inventory"
    assert f"inventory {inventory}" in installed_lab.stdout, installed_lab.stdout
    status = _check(run(installed, "lab", "status"), "gpufleet lab status").stdout.split()
    assert status == ["gpufleet-lab-1", "127.0.0.11:2201", "running", "ssh", "up"], status
    # The emulator is the package's, started from the lab directory.
    pid = json.loads((installed.lab_dir / "emulator.pid").read_text())["pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    assert argv[1:3] == ["-m", "gpufleet.lab._cloud.aliyun"], argv
    assert Path(f"/proc/{pid}/cwd").resolve() == installed.lab_dir.resolve()


def test_drift_from_the_installed_cli_finds_the_unconverged_node_drifted(installed, installed_lab):
    assert installed_lab.returncode == 0, installed_lab.stderr
    # One role's tags: the scan of a node site.yml never converged has
    # drift in every role, and baseline's alone shows it in a fraction of
    # a whole scan's time.
    scan = run(installed, "drift", "-i", str(installed.lab_dir / "inventory"), "--tags", "baseline",
               timeout=SCAN_S)
    # Bit 2 (drift), and neither a usage error (1) nor an unreachable host (8).
    assert scan.returncode & 2 and not scan.returncode & (1 | 8), \
        f"rc {scan.returncode}\n{scan.stdout[-3000:]}\n{scan.stderr[-3000:]}"
    assert f"gpufleet: running {installed.collection / 'playbooks' / 'drift.yml'}" in scan.stderr, scan.stderr[:2000]
    # Reports go to the working directory by default, outside the collection.
    reports = sorted(installed.cwd.glob(".gpufleet/drift/*/report.json"))
    assert len(reports) == 1, scan.stdout[-2000:]
    report = json.loads(reports[0].read_text())
    assert sorted(report["hosts"]) == [NODE]
    assert report["summary"]["exit_code"] == scan.returncode
    drifted = [r for r in report["records"] if r["state"] == "drifted"]
    assert drifted and {r["host"] for r in drifted} == {NODE}
    assert all(r["resource"].startswith("gpufleet.cloud.baseline : ") for r in drifted), drifted[:3]
