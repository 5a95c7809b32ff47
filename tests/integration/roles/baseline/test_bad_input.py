"""Bad inputs to gpufleet.cloud.baseline fail before anything changes.

Each case runs the role against a fresh real node and checks three things:
the run fails, the message names the bad variable, and nothing on the node
changed (no task reported a change, and the files and packages the role
would manage are still absent)."""

from __future__ import annotations

import pytest

from tests.integration.helpers import assert_bad_input_refused

pytestmark = pytest.mark.lab

CASES = {
    "wrong type: list expected": ({"baseline_packages": "curl"}, "baseline_packages"),
    "wrong type: int expected": ({"baseline_nofile": "lots"}, "baseline_nofile"),
    "unknown choice": ({"baseline_kernel_apply": "sometimes"}, "baseline_kernel_apply"),
    "wrong type: bool expected": ({"baseline_time_sync": "perhaps"}, "baseline_time_sync"),
    "bad package name": ({"baseline_extra_packages": ["curl; rm -rf /"]}, "baseline_extra_packages"),
    "bad sysctl key": ({"baseline_sysctl_extra": {"not a key": 1}}, "baseline_sysctl"),
    "nested sysctl value": ({"baseline_sysctl_extra": {"vm.swappiness": {"a": 1}}}, "baseline_sysctl"),
    "bad memlock": ({"baseline_memlock": "lots"}, "baseline_memlock"),
    "bad hostname": ({"baseline_hostname": "Bad_Host!"}, "baseline_hostname"),
    "bad ntp server": ({"baseline_ntp_servers": ["ntp server"]}, "baseline_ntp_servers"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node, tmp_path):
    assert_bad_input_refused(
        fresh_node,
        "gpufleet.cloud.baseline",
        CASES[case],
        tmp_path,
        paths=("/etc/sysctl.d/90-gpufleet-baseline.conf", "/etc/security/limits.d/90-gpufleet-baseline.conf"),
        packages=("chrony",),
    )
