"""Fixtures for the scripts roles install on nodes (they live under
roles/*/files and are not a package): load them by path, make their imports
resolve as they do on a node, and stand in for nvidia-smi where no GPU is.

On a node, the gpufleet_kms package is the collection's module_utils (the
_kms_client role copies it there), and the gpufleet_* modules the scripts
import are the plugins/module_utils files that _common's node_library step
installs (__common_node_library_files)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
import types
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
MODULE_UTILS = ROOT / "plugins" / "module_utils"

# Answers --query-gpu=a,b,c with the named fields of each GPU in GPUS, in
# the order asked, the way nvidia-smi's csv,noheader,nounits format does;
# and -q -x with each GPU's row-remap flags (its "remap_pending" and
# "remap_failure", "No" by default) in nvidia-smi's XML, or with SPEC's "xml"
# (text, or an exit code: "xml_rc").
FAKE_NVIDIA_SMI = textwrap.dedent(
    """\
    import json, sys
    SPEC = json.loads({spec!r})
    if SPEC["rc"]:
        print(SPEC["message"])
        sys.exit(SPEC["rc"])
    if "-q" in sys.argv and "-x" in sys.argv:
        if SPEC.get("xml_rc"):
            print("query failed")
            sys.exit(SPEC["xml_rc"])
        if SPEC.get("xml") is not None:
            print(SPEC["xml"])
            sys.exit(0)
        print("<?xml version='1.0' ?><nvidia_smi_log><driver_version>550.54.15</driver_version>")
        for gpu in SPEC["gpus"]:
            print("<gpu id='%s'><pci><pci_bus_id>%s</pci_bus_id></pci><remapped_rows>"
                  "<remapped_row_pending>%s</remapped_row_pending><remapped_row_failure>%s</remapped_row_failure>"
                  "</remapped_rows></gpu>" % (gpu.get("pci.bus_id", ""), gpu.get("pci.bus_id", ""),
                                              gpu.get("remap_pending", "No"), gpu.get("remap_failure", "No")))
        print("</nvidia_smi_log>")
        sys.exit(0)
    fields = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--query-gpu=")][0].split(",")
    for gpu in SPEC["gpus"]:
        print(", ".join(str(gpu.get(f, "[N/A]")) for f in fields))
    """
)


def _load(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _install_gpufleet_kms():
    if "gpufleet_kms" not in sys.modules:
        package = types.ModuleType("gpufleet_kms")
        package.__path__ = [str(MODULE_UTILS)]
        sys.modules["gpufleet_kms"] = package


def load_helper(role: str, filename: str, name: str):
    """Import roles/ROLE/files/FILENAME under the module name it has on a node."""
    _install_gpufleet_kms()
    return _load(name, ROOT / "roles" / role / "files" / filename)


def load_script(relative: str):
    """Import a role's node-side script (a path from the repository root)."""
    path = ROOT / relative
    return _load("gpufleet_script_" + path.stem.replace("-", "_"), path)


# gpufleet_storage imports gpufleet_kms_cli by name, as it does on a node.
load_helper("_kms_client", "gpufleet_kms_cli.py", "gpufleet_kms_cli")
# The node-side library under its names on a node, from the list _common
# installs it by.
for _file in yaml.safe_load((ROOT / "roles" / "_common" / "vars" / "main.yml").read_text())[
        "__common_node_library_files"]:
    _load(Path(_file["dest"]).stem, MODULE_UTILS / _file["src"])


@pytest.fixture
def fake_nvidia_smi(tmp_path):
    """Write an executable stand-in for nvidia-smi and return its path."""

    def make(gpus=(), rc: int = 0, message: str = "", xml: str | None = None, xml_rc: int = 0) -> str:
        path = tmp_path / "nvidia-smi"
        spec = json.dumps({"gpus": list(gpus), "rc": rc, "message": message, "xml": xml, "xml_rc": xml_rc})
        path.write_text(f"#!{sys.executable}\n" + FAKE_NVIDIA_SMI.format(spec=spec))
        path.chmod(0o755)
        return str(path)

    return make
