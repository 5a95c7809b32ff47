"""Load the helper scripts that roles install on nodes (they live under
roles/*/files and are not a package) and make their imports resolvable:
the gpufleet_kms package they import on a node is the collection's
module_utils, which the kms_client role copies there."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MODULE_UTILS = ROOT / "plugins" / "module_utils"


def _install_gpufleet_kms():
    if "gpufleet_kms" in sys.modules:
        return
    package = types.ModuleType("gpufleet_kms")
    package.__path__ = [str(MODULE_UTILS)]
    sys.modules["gpufleet_kms"] = package


def load_helper(role: str, filename: str, name: str):
    _install_gpufleet_kms()
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "roles" / role / "files" / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# gpufleet_storage imports gpufleet_kms_cli by name, as it does on a node.
load_helper("kms_client", "gpufleet_kms_cli.py", "gpufleet_kms_cli")
