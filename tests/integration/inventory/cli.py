"""Running ansible-inventory from tests, and reading its JSON."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.helpers import ROOT


def ansible_inventory(env, *args):
    # The one next to this interpreter: the venv's, whatever PATH says.
    exe = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which("ansible-inventory")
    assert exe, "ansible-inventory is not installed"
    return subprocess.run([exe, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


def plain(value):
    """A value of ansible-inventory's JSON without the {"__ansible_unsafe": ...}
    markers it puts around strings that came from an API."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
