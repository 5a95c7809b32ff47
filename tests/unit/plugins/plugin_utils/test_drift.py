"""The drift classification rules and the redaction of diffs."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _drift


@pytest.mark.parametrize(
    ("action", "result", "outcome", "state"),
    [
        ("ansible.builtin.template", {"changed": False}, "ok", _drift.IN_SYNC),
        ("ansible.builtin.template", {"changed": True}, "ok", _drift.DRIFTED),
        ("ansible.builtin.apt", {"msg": "boom"}, "failed", _drift.FAILED),
        ("ansible.builtin.apt", {}, "unreachable", _drift.UNREACHABLE),
        # check mode cannot look at what a command would do
        ("ansible.builtin.command", {"msg": "Command would have run if not in check mode"}, "skipped",
         _drift.NOT_VERIFIED),
        ("ansible.builtin.shell", {}, "skipped", _drift.NOT_VERIFIED),
        # a module without check mode support
        ("community.general.thing", {"msg": "remote module (thing) does not support check mode"}, "skipped",
         _drift.NOT_VERIFIED),
        # a module that says why it cannot look in check mode
        ("gpufleet.cloud.nft_table", {"skipped": True, "msg": "check mode cannot compare table inet gpufleet"},
         "skipped", _drift.NOT_VERIFIED),
        # skipped *because* of check mode: not verified
        ("ansible.builtin.template", {"false_condition": "not ansible_check_mode or 'chrony' in packages"},
         "skipped", _drift.NOT_VERIFIED),
        # a `when:` that does not apply to this host says nothing
        ("ansible.builtin.template", {"false_condition": "baseline_time_sync_enabled"}, "skipped", None),
        # a command whose condition, read from the node, says nothing is to do
        ("ansible.builtin.command", {"false_condition": "'hash' not in live.stdout"}, "skipped", None),
        # a command skipped by a condition on check mode: not verified
        ("ansible.builtin.command", {"false_condition": "not ansible_check_mode or ready"}, "skipped",
         _drift.NOT_VERIFIED),
        # reads own no resource...
        ("ansible.builtin.assert", {"changed": False}, "ok", None),
        ("ansible.builtin.package_facts", {}, "ok", None),
        ("ansible.builtin.set_fact", {}, "skipped", None),
        # ...but a read that fails means the host was not verified
        ("ansible.builtin.stat", {"msg": "permission denied"}, "failed", _drift.FAILED),
        # a probe command run with check_mode: false and no change is not a resource
        ("ansible.builtin.command", {"changed": False, "rc": 0}, "ok", None),
        ("ansible.builtin.command", {"changed": True, "rc": 0}, "ok", _drift.DRIFTED),
    ],
)
def test_classify(action, result, outcome, state):
    assert _drift.classify(action, result, outcome) == state


def test_resource_id_is_stable_and_includes_the_item_label():
    assert _drift.resource_id("r : Write x ") == "r : Write x"
    assert _drift.resource_id("r : Write x", "vm.swappiness") == "r : Write x [vm.swappiness]"
    assert _drift.resource_id("r : Write x", "") == "r : Write x"


def test_redact_diff_hides_no_log_content():
    result = {"changed": True, "diff": [{"before": "secret-old", "after": "secret-new"}]}
    assert _drift.redact_diff(result, no_log=True) == _drift.REDACTED
    assert "secret" not in str(_drift.redact_diff(result, no_log=True))
    censored = {"changed": True, "censored": "the output has been hidden", "_ansible_no_log": True}
    assert _drift.redact_diff(censored, no_log=False) == _drift.REDACTED


def test_redact_diff_keeps_before_and_after_of_ordinary_tasks():
    result = {"changed": True, "diff": {"before": "a\n", "after": "b\n", "before_header": "/etc/x"}}
    assert _drift.redact_diff(result, no_log=False) == [{"before": "a\n", "after": "b\n", "before_header": "/etc/x"}]
    assert _drift.redact_diff({"changed": True, "diff": []}, no_log=False) is None
    assert _drift.redact_diff({"changed": True}, no_log=False) is None


def test_exit_code_is_a_bitmask_and_waived_drift_does_not_count():
    recs = [
        {"host": "a", "resource": "r1", "state": _drift.DRIFTED},
        {"host": "b", "resource": "r2", "state": _drift.FAILED},
        {"host": "c", "resource": "r3", "state": _drift.UNREACHABLE},
    ]
    assert _drift.exit_code(recs) == 2 | 4 | 8
    assert _drift.exit_code(recs[:1], waived={("a", "r1")}) == 0
    assert _drift.exit_code([{"host": "a", "resource": "r", "state": _drift.IN_SYNC}]) == 0


def test_a_unit_task_without_a_diff_shows_what_systemd_said_against_what_is_wanted():
    # systemd_service in check mode: `status` is what systemctl showed
    # before; enabled and state are what the task wants.
    result = {"changed": True, "name": "gpufleet-health.timer", "enabled": True, "state": "started",
              "status": {"ActiveState": "inactive", "UnitFileState": "masked", "Id": "gpufleet-health.timer"}}
    assert _drift.unit_diff(result) == [{
        "before_header": "gpufleet-health.timer (systemd)", "after_header": "gpufleet-health.timer (wanted)",
        "before": "ActiveState=inactive\nUnitFileState=masked\n",
        "after": "ActiveState=active\nUnitFileState=enabled\n"}]
    # A task that changed nothing, or a result without systemd's status, has none.
    assert _drift.unit_diff({**result, "changed": False}) is None
    assert _drift.unit_diff({"changed": True, "diff": []}) is None
