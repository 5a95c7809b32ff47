# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The gpufleet_* variables a node's runs read from the inventory, as a
filter: playbooks/pull.yml hands them to the node's pull runs. The list is
plugin_utils/_node_vars.py's. Documentation is in node_vars.yml."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cloud.plugins.plugin_utils._node_vars import node_vars as _node_vars


def node_vars(variables):
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("node_vars takes a host's variables (hostvars[inventory_hostname]), not %s"
                                 % type(variables).__name__)
    return _node_vars(variables)


class FilterModule:
    """The node's inventory variables."""

    def filters(self):
        return {"node_vars": node_vars}
