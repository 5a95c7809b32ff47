"""Shared testinfra helpers for every Molecule scenario.

Pytest loads this file for any test under extensions/molecule/, so each
scenario's tests/ only holds the checks of its own role.
"""

from __future__ import annotations

import pytest


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


@pytest.fixture
def major(host) -> int:
    return debian_major(host)
