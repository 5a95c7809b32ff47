# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Jinja tests for IP networks, with Python's own ipaddress module.

Role preflights use them to refuse a malformed CIDR before it reaches an
nftables ruleset or sshd, and to check that the controller's own address is
in an SSH allowlist before a firewall could lock it out. ansible.utils has
similar filters but needs netaddr on the controller; these need nothing.
Documentation for each test is in the .yml file of its name.
"""

from __future__ import annotations

import ipaddress


def ip_network(value) -> bool:
    """True for an IPv4/IPv6 address or a CIDR whose host bits are zero."""
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        return False
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return False
    return True


def ip_in_networks(value, networks) -> bool:
    """True when the address `value` lies in one of `networks`. Entries of
    `networks` that are not valid networks never match."""
    try:
        address = ipaddress.ip_address(str(value).strip())
    except ValueError:
        return False
    for network in networks or []:
        if not ip_network(network):
            continue
        net = ipaddress.ip_network(network, strict=True)
        if address.version == net.version and address in net:
            return True
    return False


class TestModule:
    def tests(self):
        return {"ip_network": ip_network, "ip_in_networks": ip_in_networks}
