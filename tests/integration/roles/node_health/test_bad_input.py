"""Bad inputs to gpufleet.cloud.node_health fail before anything changes:
the run fails, the message names the bad variable, no task changed, and the
check script and its timer are not on the node."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"node_health_xid_ignored": [13], "gpufleet_strict_inputs": True},
        "node_health_xid_ignored",
        "did you mean node_health_xid_ignore?",
    ),
    "string for a list": ({"node_health_xid_ignore": "13"}, "node_health_xid_ignore", "expected a list"),
    "threshold not a number": ({"node_health_nccl_min_busbw_gbps": "fast"}, "node_health_nccl_min_busbw_gbps"),
    "GPU count not a number": ({"node_health_expected_gpu_count": "eight"}, "node_health_expected_gpu_count"),
    # A share below 1 is a vGPU slice; above 1 a count is whole.
    "GPU count a fraction above 1": ({"node_health_expected_gpu_count": 1.5}, "node_health_expected_gpu_count"),
    "GPU count negative": ({"node_health_expected_gpu_count": -1}, "node_health_expected_gpu_count"),
    "NCCL check with a threshold of 0": ({"node_health_nccl_enabled": True, "node_health_nccl_min_busbw_gbps": 0},
                                         "node_health_nccl_min_busbw_gbps"),
    "bad driver pin": ({"node_health_driver_version": "r550"}, "node_health_driver_version"),
    "negative ECC limit": ({"node_health_ecc_max_uncorrected": -1}, "node_health_ecc_max_uncorrected"),
    "wrong element type": ({"node_health_xid_ignore": ["seventy-nine"]}, "node_health_xid_ignore"),
    # The fault policies (gpufleet.cloud.fault_policy_problems): each names its entry.
    "fault class not in the catalogue": ({"node_health_fault_policy": {"RESTART_APPS": {"threshold": 5}}},
                                         "node_health_fault_policy.RESTART_APPS", "is not a class"),
    "fault threshold of 0": ({"node_health_fault_policy": {"RESET_GPU": {"threshold": 0}}},
                             "node_health_fault_policy.RESET_GPU.threshold", "must be a whole number from 1"),
    "fault policy with an unknown key": ({"node_health_fault_policy": {"RESET_GPU": {"limit": 2}}},
                                         "node_health_fault_policy.RESET_GPU", "'limit' is not one of"),
    "XID policy for a code that is no number": ({"node_health_xid_policy": {"xid79": {"threshold": 2}}},
                                                "node_health_xid_policy.xid79", "is not an XID code"),
    "XID policy with a class not in the catalogue": ({"node_health_xid_policy": {79: {"class": "REBOOT"}}},
                                                     "node_health_xid_policy.79.class", "is not a class"),
    "XID policy window of 0": ({"node_health_xid_policy": {79: {"window_minutes": 0}}},
                               "node_health_xid_policy.79.window_minutes", "must be a whole number from 1"),
    "kernel log path not absolute": ({"node_health_kernel_log_path": "kern.log"}, "node_health_kernel_log_path"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.node_health",
    CASES,
    files=["/usr/local/lib/gpufleet/gpufleet-health.py", "/etc/systemd/system/gpufleet-health.timer"],
    packages=[],
)
