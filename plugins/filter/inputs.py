# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The roles' input checks that walk a structure, as filters.

A role's preflight states each check and its message; finding the bad
entries is done here, tested as a unit (tests/unit/plugins/filter/
test_inputs.py), instead of in Jinja loops that only a lab run could test.
Documentation for each filter is in the .yml file of its name.
"""

from __future__ import annotations

import numbers
import re

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_faults import policy_problems, repair_class_problems
from ansible_collections.gpufleet.cloud.plugins.test.network import ip_network

_SYSCTL_NAME = re.compile(r"^[a-z0-9_]+([./][A-Za-z0-9_*-]+)+$")
_SYSCTL_VALUE = re.compile(r"^[A-Za-z0-9 ._:/-]+$")


def _as_int(value) -> int:
    """A number as Jinja's int filter reads it: 0 where it reads none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _bad_ports(values) -> list:
    ports = [_as_int(value) for value in values]
    return [port for port in ports if port < 1] + [port for port in ports if port > 65535]


def _bad_networks(values) -> list:
    return [value for value in values if not ip_network(value)]


_KINDS = {"network": _bad_networks, "port": _bad_ports}


def invalid_by_option(values_by_option, kind):
    """{option: its bad entries} for the options that have any, in order.
    kind network: not an IP address or a CIDR with its host bits zero;
    kind port: out of 1 to 65535 (read as whole numbers, as Jinja's int)."""
    if kind not in _KINDS:
        raise AnsibleFilterError("invalid_by_option: kind must be one of %s, not %r" % (", ".join(sorted(_KINDS)), kind))
    found = {}
    for option, values in (values_by_option or {}).items():
        bad = _KINDS[kind](list(values or []))
        if bad:
            found[option] = bad
    return found


def sysctl_invalid_names(params) -> list:
    """The keys of a kernel-parameter dict that are not parameter names."""
    return [name for name in (params or {}) if not (isinstance(name, str) and _SYSCTL_NAME.match(name))]


def sysctl_invalid_values(params) -> list:
    """The keys whose value is neither a number nor a string, then those
    whose string is not plain (letters, digits, space and ._:/-)."""
    items = list((params or {}).items())
    return ([name for name, value in items if not isinstance(value, (numbers.Number, str))]
            + [name for name, value in items if isinstance(value, str) and not _SYSCTL_VALUE.match(value)])


class FilterModule:
    """The roles' structural input checks."""

    def filters(self):
        return {
            # The node scripts' own checks of their configuration (node_health's
            # fault policies, the guard's classes to repair), registered as they are.
            "fault_policy_problems": policy_problems,
            "invalid_by_option": invalid_by_option,
            "repair_class_problems": repair_class_problems,
            "sysctl_invalid_names": sysctl_invalid_names,
            "sysctl_invalid_values": sysctl_invalid_values,
        }
