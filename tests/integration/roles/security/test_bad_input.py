"""Bad inputs to gpufleet.cloud.security fail before anything changes: the
run fails, the message names the bad variable, no task changed, and sshd"s
drop-in and the firewall are not on the node."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

# Valid allowlists, so each case has exactly one thing wrong.
GOOD = {"security_ssh_allowed_cidrs": ["10.0.0.0/8"], "security_monitoring_cidrs": ["10.0.0.0/8"]}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"security_ssh_allowed_cidr": ["10.0.0.0/8"], "gpufleet_strict_inputs": True},
        "security_ssh_allowed_cidr",
        "did you mean security_ssh_allowed_cidrs?",
    ),
    "string for a list": ({"security_cluster_cidrs": "10.0.0.0/8"}, "security_cluster_cidrs", "expected a list"),
    "invalid CIDR": ({"security_ssh_allowed_cidrs": ["10.0.0.300/8"]}, "security_ssh_allowed_cidrs"),
    "CIDR with host bits set": ({"security_monitoring_cidrs": ["10.1.2.3/8"]}, "security_monitoring_cidrs"),
    "invalid CIDR in a rule": (
        {"security_firewall_rules": [{"port": 8080, "cidrs": ["fd00::zz/64"]}]},
        "security_firewall_rules",
    ),
    "empty allowlist not confirmed": ({"security_ssh_allowed_cidrs": []}, "security_empty_allowlists_confirmed"),
    "wrong type: int expected": ({"security_ssh_port": "ssh"}, "security_ssh_port"),
    "unknown choice": ({"security_firewall_deny": "ignore"}, "security_firewall_deny"),
    "overrides neither disabled nor reported": ({"security_sshd_overrides": "fix"}, "security_sshd_overrides",
                                                "disable, report"),
    "root login allowed": ({"security_ssh_permit_root_login": "yes"}, "security_ssh_permit_root_login"),
    "port out of range": ({"security_monitoring_ports": [9100, 70000]}, "security_monitoring_ports"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.security",
    CASES,
    files=["/etc/ssh/sshd_config.d/00-gpufleet-security.conf", "/etc/nftables.d"],
    packages=["nftables"],
    good=GOOD,
)
