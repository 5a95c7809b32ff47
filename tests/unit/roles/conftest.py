"""Fixtures for the scripts roles install on nodes: load them by path, and
stand in for nvidia-smi where no GPU exists."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Answers --query-gpu=a,b,c with the named fields of each GPU in GPUS, in
# the order asked, the way nvidia-smi's csv,noheader,nounits format does.
FAKE_NVIDIA_SMI = textwrap.dedent(
    """\
    import json, sys
    SPEC = json.loads({spec!r})
    if SPEC["rc"]:
        print(SPEC["message"])
        sys.exit(SPEC["rc"])
    fields = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--query-gpu=")][0].split(",")
    for gpu in SPEC["gpus"]:
        print(", ".join(str(gpu.get(f, "[N/A]")) for f in fields))
    """
)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The roles install plugins/module_utils/textfile.py next to their scripts
# under this name.
_load("gpufleet_textfile", ROOT / "plugins" / "module_utils" / "textfile.py")


def load_script(relative: str):
    """Import a role's node-side script as a module."""
    path = ROOT / relative
    return _load("gpufleet_script_" + path.stem.replace("-", "_"), path)


@pytest.fixture
def fake_nvidia_smi(tmp_path):
    """Write an executable stand-in for nvidia-smi and return its path."""

    def make(gpus=(), rc: int = 0, message: str = "") -> str:
        path = tmp_path / "nvidia-smi"
        spec = json.dumps({"gpus": list(gpus), "rc": rc, "message": message})
        path.write_text(f"#!{sys.executable}\n" + FAKE_NVIDIA_SMI.format(spec=spec))
        path.chmod(0o755)
        return str(path)

    return make
