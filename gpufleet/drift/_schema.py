"""The drift record model the CLI reads reports with: the collection's own
plugins/plugin_utils/_drift.py, which the callback writes them with. The
record states, the exit bitmask and the report's schema version are defined
there once."""

from __future__ import annotations

import importlib
from pathlib import Path

# A checkout links itself as collections/ansible_collections/gpufleet/cloud,
# the path its ansible.cfg uses; an installed collection is found on the
# paths Ansible is configured with (ANSIBLE_COLLECTIONS_PATH, ansible.cfg,
# ~/.ansible/collections).
_CHECKOUT = Path(__file__).resolve().parents[2] / "collections"
_MODULE = "ansible_collections.gpufleet.cloud.plugins.plugin_utils._drift"


def _load():
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        from ansible.plugins.loader import init_plugin_loader

        init_plugin_loader([str(_CHECKOUT)] if _CHECKOUT.is_dir() else [])
    try:
        return importlib.import_module(_MODULE)
    except ImportError as exc:
        raise ImportError(f"gpufleet needs the gpufleet.cloud collection for its drift model ({exc}): install it "
                          "(ansible-galaxy collection install) or run from a checkout") from exc


drift = _load()
