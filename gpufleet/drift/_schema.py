"""The drift record model the CLI reads reports with: the collection's own
plugins/plugin_utils/_drift.py, which the callback writes them with. The
record states, the exit bitmask and the report's schema version are defined
there once. Likewise node_doctor, the collection's reader of the guard's
repairs file (plugins/plugin_utils/_node_doctor.py), which node_facts reads
the node view of GPU faults with and `gpufleet guard status` reads too."""

from __future__ import annotations

import importlib
from pathlib import Path

from .. import _project

_PACKAGE = "ansible_collections.gpufleet.cloud.plugins.plugin_utils."


def _load(name: str):
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        # The same collection the scan runs (gpufleet._project): a checkout
        # links itself as collections/ansible_collections/gpufleet/cloud,
        # the path its ansible.cfg names first; outside one, the paths
        # Ansible is configured with, which init_plugin_loader adds itself.
        checkout = _project.find_checkout()
        link = checkout / "collections" if checkout else None
        init_plugin_loader([str(link)] if link and link.is_dir() else [])
    try:
        return importlib.import_module(_PACKAGE + name)
    except ImportError as exc:
        paths = _project.configured_collection_paths()
        raise ImportError(f"gpufleet drift reads its reports with the gpufleet.cloud collection's drift model "
                          f"({exc}): {_project.not_found_message(paths, Path.cwd())}") from exc


drift = _load("_drift")
node_doctor = _load("_node_doctor")
