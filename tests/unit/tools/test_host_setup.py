"""tools/host-setup.sh: the one list of host commands, checked after
installing, names the package of any command that is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "host-setup.sh"


def commands() -> dict[str, str]:
    block = re.search(r"^COMMANDS=\((.*?)^\)", SCRIPT.read_text(), re.M | re.S)[1]
    pairs = (line.split("#")[0].strip() for line in block.splitlines())
    return dict(pair.split(":", 1) for pair in pairs if pair)


def check(path: str) -> subprocess.CompletedProcess:
    # bash itself by absolute path: PATH holds only what the test allows.
    return subprocess.run([shutil.which("bash"), str(SCRIPT), "--check"], env={**os.environ, "PATH": path},
                          capture_output=True, text=True, check=False)


def test_slirp4netns_is_listed_itself_not_left_to_podman_recommends():
    assert commands()["slirp4netns"] == "slirp4netns"
    assert commands()["podman"] == "podman"


def test_a_missing_command_is_named_with_its_package(tmp_path):
    listed = commands()
    # Every listed command but slirp4netns, as a stub on an otherwise empty PATH.
    for command in listed:
        if command != "slirp4netns":
            stub = tmp_path / command
            stub.write_text("#!/bin/sh\n")
            stub.chmod(0o755)
    out = check(str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "command 'slirp4netns' is missing: install the Debian package 'slirp4netns'" in out.stderr
    assert out.stderr.count("is missing") == 1, out.stderr


def test_all_present_passes(tmp_path):
    for command in commands():
        stub = tmp_path / command
        stub.write_text("#!/bin/sh\n")
        stub.chmod(0o755)
    out = check(str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"all {len(commands())} host commands present" in out.stdout
