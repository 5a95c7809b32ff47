"""Bad inputs to gpufleet.cloud.baseline fail before anything changes.

Each case applies the role to a fresh real node (all cases in one run, see
../bad_input.py) and checks three things:
the run fails, the message names the bad variable, and nothing on the node
changed (no task reported a change, and the files and packages the role
would manage are still absent)."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

# Files the role manages: none may exist after a failed run.
PATHS = ["/etc/sysctl.d/90-gpufleet-baseline.conf", "/etc/security/limits.d/90-gpufleet-baseline.conf"]

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"baseline_ntp_server": ["ntp.example.com"], "gpufleet_strict_inputs": True},
        "baseline_ntp_server",
        "did you mean baseline_ntp_servers?",
    ),
    "wrong type: list expected": ({"baseline_packages": "curl"}, "baseline_packages", "expected a list"),
    "wrong type: int expected": ({"baseline_nofile": "lots"}, "baseline_nofile"),
    "unknown choice": ({"baseline_kernel_apply": "sometimes"}, "baseline_kernel_apply"),
    "wrong type: bool expected": ({"baseline_time_sync_enabled": "perhaps"}, "baseline_time_sync_enabled"),
    "bad package name": ({"baseline_extra_packages": ["curl; rm -rf /"]}, "baseline_extra_packages"),
    "bad sysctl key": ({"baseline_sysctl_extra": {"not a key": 1}}, "baseline_sysctl_extra"),
    "nested sysctl value": ({"baseline_sysctl_extra": {"vm.swappiness": {"a": 1}}}, "baseline_sysctl_extra"),
    "bad memlock": ({"baseline_memlock": "lots"}, "baseline_memlock"),
    "bad hostname": ({"baseline_hostname": "Bad_Host!"}, "baseline_hostname"),
    "bad ntp server": ({"baseline_ntp_servers": ["ntp server"]}, "baseline_ntp_servers"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.baseline",
    CASES,
    files=PATHS,
    packages=["chrony"],
)
