"""Fixtures for tests that drive real nodes."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid

import pytest

from tests.integration.helpers import gpufleet


def _unavailable(reason: str):
    # In CI a missing prerequisite is a broken setup, never a silent skip.
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def node_container(*podman_args: str):
    """A fresh, booted Debian 12 node in podman, started with extra
    `podman run` arguments; removed afterwards. Yields its name."""
    if not shutil.which("podman"):
        _unavailable("podman is not installed")
    image = "localhost/gpufleet-debian:12"
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        _unavailable(f"{image} is missing: run `make images`")
    name = f"gpufleet-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["podman", "run", "-d", "--name", name, *podman_args, image, "/sbin/init"], check=True, capture_output=True
    )
    try:
        subprocess.run(
            ["podman", "exec", name, "systemctl", "is-system-running", "--wait"], check=False, capture_output=True
        )
        yield name
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "2", name], check=False, capture_output=True)


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


@pytest.fixture(scope="module")
def lab():
    """A fresh lab fleet (3 nodes) for one test module, removed afterwards."""
    with lab_fleet():
        yield
