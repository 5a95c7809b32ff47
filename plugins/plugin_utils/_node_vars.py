# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``gpufleet_*`` variables a node's runs read from the inventory: one list.

Private to gpufleet.cloud. A push run (site.yml from a controller) has them
from the inventory plugins and the inventory's group_vars; a pull run
(ansible-pull on the node, playbooks/pull.yml) sees the node alone, so the
push run that sets pull mode up hands over every one of them the node has
(the gpufleet.cloud.node_vars filter). The node's metadata service cannot
give all of them (a GPU share, the price), so they come from the inventory.

tests/unit/plugins/plugin_utils/test_node_vars.py fails when a role or a
playbook reads a ``gpufleet_*`` variable that is not listed here (nor set by
the collection itself).
"""

from __future__ import annotations

from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_record import RECORD_KEYS
from ansible_collections.gpufleet.cloud.plugins.plugin_utils._role_inputs import FLEET

# What the node is, as the inventory plugins find it: one variable per key
# of the record every cloud's plugin publishes.
DISCOVERY = tuple("gpufleet_" + key for key in RECORD_KEYS)

# Settings of the whole fleet, set in the inventory's group_vars: the ones
# every role reads (FLEET), the preflight's strictness, and site.yml's switch
# for the GPU stack.
SETTINGS = FLEET + ("gpufleet_strict_inputs", "gpufleet_site_gpu_stack")

# What a pull run gets from the push inventory, in this order.
NODE_VARIABLES = DISCOVERY + SETTINGS

# site.yml's rolling batches (extra variables of a push run, templated before
# any host is known): a pull run is one node in a batch of its own.
PUSH_ONLY = ("gpufleet_serial", "gpufleet_max_fail_percentage")


def node_vars(variables):
    """The variables of NODE_VARIABLES that `variables` (a host's variables)
    defines, as they are: a value the inventory marked unsafe stays so. An
    undefined one is left out, so the pull run falls back to the role's
    default, as a push run would."""
    return {name: variables[name] for name in NODE_VARIABLES if name in variables}
