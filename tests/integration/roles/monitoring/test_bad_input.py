"""Bad inputs to gpufleet.cloud.monitoring fail before anything changes: the
run fails, the message names the bad variable, no task changed, and no
exporter is installed or configured."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"monitoring_node_exporter_adress": "0.0.0.0:9100", "gpufleet_strict_inputs": True},
        "monitoring_node_exporter_adress",
        "did you mean monitoring_node_exporter_address?",
    ),
    "string for a list": ({"monitoring_node_exporter_args": "--collector.systemd"}, "monitoring_node_exporter_args", "expected a list"),
    # TEST-NET-3: never an address of a test node.
    "exporter address not on the node": (
        {"monitoring_node_exporter_address": "203.0.113.9"},
        "monitoring_node_exporter_address",
    ),
    "threshold not a number": ({"monitoring_alert_gpu_temperature_celsius": "hot"}, "monitoring_alert_gpu_temperature_celsius"),
    "threshold out of range": ({"monitoring_alert_gpu_idle_percent": 250}, "monitoring_alert_gpu_idle_percent"),
    "guard's stale threshold below a minute": (
        {"monitoring_alert_guard_stale_seconds": 10},
        "monitoring_alert_guard_stale_seconds",
    ),
    "pull's stale threshold below a minute": (
        {"monitoring_alert_pull_stale_seconds": 30},
        "monitoring_alert_pull_stale_seconds",
    ),
    # The fleet's setting, which the dcgm role reads too.
    "unknown GPU exporter": ({"gpufleet_gpu_exporter": "nvml"}, "gpufleet_gpu_exporter", "must be one of"),
    "wrong type: int expected": ({"monitoring_node_exporter_port": "nine-thousand"}, "monitoring_node_exporter_port"),
    "price not a number": ({"monitoring_instance_prices": {"g5.xlarge": "cheap"}}, "monitoring_instance_prices"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.monitoring",
    CASES,
    files=["/etc/default/prometheus-node-exporter", "/etc/gpufleet"],
    packages=["prometheus-node-exporter"],
)
