"""Bad inputs to gpufleet.cloud.guard fail before anything changes: the run
fails, the message names the bad variable, no task changed, and the daemon
and its service are not on the node."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

SECRET = "gpufleet-bad-input-secret-51c2"
KEYS = {"access_key_id": "AKIDgpufleet", "secret_access_key": SECRET}
STOP = {"guard_final_action": "stop", "guard_cloud": "tencent", "guard_stop_instance_id": "ins-1a2b3c4d",
        "guard_stop_region": "ap-guangzhou", "guard_stop_credentials": KEYS}

# Repair on, with a breaker in the backups' bucket: valid as it is.
REPAIR = {"guard_repair_classes": ["RESTART_APP"], "guard_repair_breaker_bucket": "gpufleet-backups"}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"guard_idle_window_minute": 30, "gpufleet_strict_inputs": True},
        "guard_idle_window_minute",
        "did you mean guard_idle_window_minutes?",
    ),
    "string for a list": ({"guard_job_units": "train.service"}, "guard_job_units", "expected a list"),
    "spot without a cloud": ({"guard_spot_enabled": True, "guard_cloud": ""}, "guard_cloud"),
    "unknown final action": ({"guard_final_action": "terminate"}, "guard_final_action"),
    # The stop through the cloud's SDK: the cloud, the instance and
    # credentials, each named.
    "stop without a cloud": (
        {**STOP, "guard_cloud": ""}, "guard_cloud", "whose API stops this instance"),
    "stop without the instance": (
        {**STOP, "guard_stop_instance_id": ""}, "guard_stop_instance_id", "gpufleet_instance_id"),
    "stop without credentials": (
        {**STOP, "guard_stop_credentials": {}}, "guard_stop_uses_instance_role", "guard_stop_credentials"),
    "stop with half a key": (
        {**STOP, "guard_stop_credentials": {"access_key_id": "AKIDhalf"}}, "guard_stop_credentials"),
    "stop with an unknown credential key": (
        {**STOP, "guard_stop_credentials": {**KEYS, "secret": "x"}}, "guard_stop_credentials", "unknown: secret"),
    # A mistyped secret is refused without being shown (FORBIDDEN below).
    "credentials as a string": (
        {**STOP, "guard_stop_credentials": "AKIDgpufleet:" + SECRET}, "guard_stop_credentials"),
    "a signal that leaves no time": ({"guard_signal": "SIGKILL"}, "guard_signal"),
    "threshold above 100 %": ({"guard_idle_threshold_percent": 150}, "guard_idle_threshold_percent"),
    "price not a number": ({"guard_price_per_hour": "cheap"}, "guard_price_per_hour"),
    "negative cap": ({"guard_node_cap": -5}, "guard_node_cap"),
    "job cap without the job's unit": ({"guard_job_cap": 50}, "guard_budget_job_unit"),
    "relative marker path": ({"guard_marker_path": "event.json"}, "guard_marker_path"),
    "poll of zero seconds": ({"guard_poll_seconds": 0}, "guard_poll_seconds"),
    "maintenance lead of zero minutes": ({"guard_maintenance_lead_minutes": 0}, "guard_maintenance_lead_minutes",
                                         "must be at least 1"),
    "maintenance switch not a boolean": ({"guard_maintenance_enabled": "sometimes"}, "guard_maintenance_enabled"),
    # The repair ladder: its classes, times and fleet breaker, each named.
    "repair of a class with no step": (
        {**REPAIR, "guard_repair_classes": ["RESTART_APP", "IGNORE"]}, "guard_repair_classes",
        "IGNORE asks for no repair step"),
    "repair of a class the catalogue lacks": (
        {**REPAIR, "guard_repair_classes": ["REBOOT"]}, "guard_repair_classes", "'REBOOT' is not a class"),
    "repair verify of zero minutes": ({**REPAIR, "guard_repair_verify_minutes": 0}, "guard_repair_verify_minutes"),
    "repair reboot wait of zero minutes": (
        {**REPAIR, "guard_repair_reboot_wait_minutes": 0}, "guard_repair_reboot_wait_minutes"),
    "repair share above the whole group": ({**REPAIR, "guard_repair_group_share": 1.5}, "guard_repair_group_share"),
    "repair window of zero minutes": ({**REPAIR, "guard_repair_window_minutes": 0}, "guard_repair_window_minutes"),
    "repair lease of zero minutes": ({**REPAIR, "guard_repair_lease_minutes": 0}, "guard_repair_lease_minutes"),
    "repair group the inventory lacks": (
        {**REPAIR, "guard_repair_group": "gpu-h100"}, "guard_repair_group", "must name an inventory group"),
    "repair without a breaker": (
        {**REPAIR, "guard_repair_breaker_bucket": ""}, "guard_repair_breaker_bucket", "guard_repair_breaker_command"),
    "repair breaker command not absolute": (
        {**REPAIR, "guard_repair_breaker_command": ["fleet-breaker"]}, "guard_repair_breaker_command"),
    "repair breaker prefix with a double slash": (
        {**REPAIR, "guard_repair_breaker_prefix": "gpufleet//breaker"}, "guard_repair_breaker_prefix"),
    "repair breaker with half a key": (
        {**REPAIR, "guard_repair_breaker_credentials": {"access_key_id": "AKIDhalf"}},
        "guard_repair_breaker_credentials"),
    "repair report path relative": ({**REPAIR, "guard_repair_health_report": "report.json"},
                                    "guard_repair_health_report"),
    "repair reboot without credentials": (
        {**REPAIR, "guard_cloud": "tencent", "guard_stop_instance_id": "ins-1a2b3c4d",
         "guard_stop_region": "ap-guangzhou"}, "guard_stop_uses_instance_role", "may reboot this instance"),
    # AWS gives a spot instance 2 minutes: a 180 s margin leaves the hook
    # nothing, whatever guard_checkpoint_seconds (idle and budget only) says.
    "a margin past AWS's spot notice": (
        {"guard_spot_enabled": True, "guard_cloud": "aws", "guard_hook_margin_seconds": 180, "guard_checkpoint_seconds": 600},
        "guard_hook_margin_seconds", "a spot notice on AWS comes 120 s before the reclaim"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.guard",
    CASES,
    files=["/usr/local/lib/gpufleet/guard/gpufleet_guard.py", "/etc/systemd/system/gpufleet-guard.service"],
    packages=[],
    forbidden=[SECRET],
)
