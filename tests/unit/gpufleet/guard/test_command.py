"""`gpufleet guard status`: each node's row from what the playbook read
(a metrics file, none, an unreachable node, a file that does not parse),
unknown shown as unknown, and the exit bitmask."""

from __future__ import annotations

import base64
import json
import re
from argparse import Namespace
from pathlib import Path

import pytest

from gpufleet.guard import _command
from gpufleet.guard._status import NO_GUARD, REPORTING, UNREACHABLE, UNREADABLE, from_metrics, parse

METRICS = """\
# HELP gpufleet_guard_spot_state The spot notice as last read.
# TYPE gpufleet_guard_spot_state gauge
gpufleet_guard_spot_state{cloud="tencent",state="notice"} 1
gpufleet_guard_spot_state{cloud="tencent",state="clear"} 0
gpufleet_guard_spot_deadline_timestamp_seconds{cloud="tencent"} 1000120.0
gpufleet_guard_maintenance_state{cloud="tencent",state="scheduled"} 0
gpufleet_guard_maintenance_state{cloud="tencent",state="not_read"} 1
gpufleet_guard_maintenance_unreadable_events NaN
gpufleet_guard_idle_seconds 0.0
gpufleet_guard_idle_armed 1
gpufleet_guard_idle_window_seconds 3600.0
gpufleet_guard_budget_state{state="ok"} 0
gpufleet_guard_budget_state{state="alarm"} 1
gpufleet_guard_spend{scope="node"} 320.5
gpufleet_guard_spend{scope="job"} NaN
gpufleet_guard_price_per_hour 3.2
gpufleet_guard_spend_cap{scope="node"} 400.0
gpufleet_guard_spend_cap{scope="job"} NaN
gpufleet_guard_last_event_timestamp_seconds{reason="spot",action="none"} 1000001.0
gpufleet_guard_checkpoint_landed{reason="spot"} 0
gpufleet_guard_last_poll_timestamp_seconds 1000000.0
"""
# A node with no price, no events and a metadata service it cannot read.
BLIND = """\
gpufleet_guard_spot_state{cloud="aws",state="unknown"} 1
gpufleet_guard_spot_deadline_timestamp_seconds{cloud="aws"} NaN
gpufleet_guard_budget_state{state="unknown"} 1
gpufleet_guard_spend{scope="node"} NaN
gpufleet_guard_price_per_hour NaN
gpufleet_guard_spend_cap{scope="node"} NaN
gpufleet_guard_last_poll_timestamp_seconds 999990.0
"""


def ok(host, text):
    content = base64.b64encode(text.encode()).decode()
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": _command.TASK, "res": {"content": content}}}


EVENTS = [
    {"event": "playbook_on_task_start", "event_data": {"task": _command.TASK}},
    ok("gpu-a", METRICS),
    ok("gpu-b", BLIND),
    {"event": "runner_on_ok", "event_data": {"host": "cpu-c", "task": _command.TASK,
                                             "res": {"msg": "file not found: /var/lib/prometheus/node-exporter/gpufleet_guard.prom"}}},
    {"event": "runner_on_unreachable", "event_data": {"host": "gpu-d", "res": {"msg": "ssh: connect to host 10.0.0.4 port 22: No route"}}},
    ok("gpu-e", "gpufleet_guard_spend {scope=node} lots\n"),
]


@pytest.fixture
def fleet(monkeypatch):
    def run_playbook(root, playbook, inventory, extra_env, cmdline, limit, tags, quiet, on_event=None):
        assert playbook == "playbooks/guard_status.yml" and cmdline == "" and tags is None
        for event in EVENTS:
            on_event(event)
        return 2, "failed"

    monkeypatch.setattr(_command._ansible, "run_playbook", run_playbook)


def collect_from(monkeypatch, events):
    """What collect() makes of these playbook events."""
    def run_playbook(*_args, on_event=None, **_kwargs):
        for event in events:
            on_event(event)
        return 0, "successful"

    monkeypatch.setattr(_command._ansible, "run_playbook", run_playbook)
    return _command.collect(Path("."), "inv", None, True)[0]


def test_every_kind_of_node_gets_its_row(fleet, tmp_path):
    nodes, rc, _status = _command.collect(tmp_path, "inv", None, True)
    assert rc == 2
    assert [(n.host, n.state) for n in nodes] == [("cpu-c", NO_GUARD), ("gpu-a", REPORTING), ("gpu-b", REPORTING),
                                                  ("gpu-d", UNREACHABLE), ("gpu-e", UNREADABLE)]
    assert "file not found" in nodes[0].detail and "No route" in nodes[3].detail
    assert _command.exit_code(nodes) == 4 | 8


def test_the_metrics_are_read_and_nan_is_unknown():
    node = from_metrics("gpu-a", METRICS)
    assert (node.cloud, node.spot, node.spot_deadline) == ("tencent", "notice", 1000120.0)
    assert (node.budget, node.spend, node.spend_cap, node.job_spend, node.job_spend_cap) == ("alarm", 320.5, 400.0, None, None)
    assert (node.last_event, node.last_action, node.checkpoint_landed) == ("spot", "none", False)
    blind = from_metrics("gpu-b", BLIND)
    assert (blind.spot, blind.spot_deadline, blind.budget, blind.spend) == ("unknown", None, "unknown", None)
    assert blind.idle_seconds is None and blind.last_event is None


def test_the_table_says_unknown_and_never_zero():
    text = _command.table([from_metrics("gpu-a", METRICS), from_metrics("gpu-b", BLIND)], now=1000000.0)
    lines = text.splitlines()
    assert lines[0].split() == ["host", "guard", "spot", "maintenance", "idle", "spend", "/", "cap", "last", "event",
                                "repair"]
    assert "notice in 2m00s (tencent)" in lines[1] and "320.50 of cap 400.00 (alarm)" in lines[1]
    assert "spot -> none, checkpoint NOT landed" in lines[1]
    # No price and no cap, said plainly.
    assert "unknown (aws)" in lines[2] and "no price known, no cap set" in lines[2] and "polled 0m10s ago" in lines[2]
    # Maintenance: not read on Tencent Cloud; a daemon that does not say is unknown.
    assert [re.split(r"\s{2,}", line)[3] for line in lines[1:]] == ["not read", "unknown"]
    assert "unknown / " not in text
    assert " 0.00 " not in text


def test_a_scheduled_maintenance_window_shows_its_code_and_when():
    scheduled = METRICS.replace('state="scheduled"} 0', 'state="scheduled"} 1').replace(
        'state="not_read"} 1', 'state="not_read"} 0') + (
        'gpufleet_guard_maintenance_window_start_timestamp_seconds{code="instance-retirement",event_id="e-2"} 1900000.0\n'
        'gpufleet_guard_maintenance_window_start_timestamp_seconds{code="system-reboot",event_id="e-1"} 1007200.0\n')
    node = from_metrics("gpu-a", scheduled)
    assert (node.maintenance, node.maintenance_code, node.maintenance_start) == ("scheduled", "system-reboot", 1007200.0)
    assert "system-reboot in 2h00m" in _command.table([node], now=1000000.0)
    assert "system-reboot now" in _command.table([node], now=1007300.0)
    assert from_metrics("gpu-b", BLIND).maintenance is None


def test_each_repair_shows_its_fault_rung_and_state_open_ones_first(monkeypatch):
    repairing = METRICS + (
        'gpufleet_guard_repair_state{fault="xid-13-0000:3b:00.0",class="RESTART_APP",rung="restart_app",state="cleared"} 1\n'
        'gpufleet_guard_repair_state{fault="xid-79-0000:3b:00.0",class="RESTART_VM",rung="reboot",state="held"} 1\n'
        'gpufleet_guard_repairs{state="held"} 1\n'
        'gpufleet_guard_repair_report_readable 1\n')
    node = from_metrics("gpu-a", repairing)
    assert node.repairs == (("xid-13-0000:3b:00.0", "RESTART_APP", "restart_app", "cleared"),
                            ("xid-79-0000:3b:00.0", "RESTART_VM", "reboot", "held"))
    line = _command.table([node], now=1000000.0).splitlines()[1]
    assert line.endswith("xid-79-0000:3b:00.0 at reboot (held); xid-13-0000:3b:00.0 at restart_app (cleared)")
    # Repair on with nothing to repair; repair off (or a daemon that does not say).
    assert _command.table([from_metrics("gpu-a", METRICS + "gpufleet_guard_repair_report_readable 1\n")],
                          now=1000000.0).splitlines()[1].endswith("  none")
    assert from_metrics("gpu-b", BLIND).repairs is None
    assert _command.table([from_metrics("gpu-b", BLIND)], now=1000000.0).splitlines()[1].endswith("  off")

    # The guard's repairs file: why the held one holds, and each step (JSON).
    history = {"repairs": [
        {"fault": "xid-79-0000:3b:00.0", "state": "held", "rung": "reboot", "why": "no reboot call is configured",
         "steps": [{"step": "breaker", "at": 999000.0, "ok": True, "detail": ""}]},
        {"fault": "xid-13-0000:3b:00.0", "state": "cleared", "rung": "restart_app", "why": "cleared after restart_app",
         "steps": []}]}
    events = [{"event": "playbook_on_task_start", "event_data": {"task": _command.TASK}}, ok("gpu-a", repairing),
              {"event": "runner_on_ok", "event_data": {"host": "gpu-a", "task": _command.REPAIRS_TASK, "res": {
                  "content": base64.b64encode(json.dumps(history).encode()).decode()}}}]
    (node,) = collect_from(monkeypatch, events)
    assert node.repair_history[0]["steps"][0]["step"] == "breaker"
    line = _command.table([node], now=1000000.0).splitlines()[1]
    assert line.endswith("xid-79-0000:3b:00.0 at reboot (held: no reboot call is configured); "
                         "xid-13-0000:3b:00.0 at restart_app (cleared)")
    # A repairs file that does not read leaves the history unknown, the row as the metrics say.
    events[-1]["event_data"]["res"]["content"] = base64.b64encode(b"{not json").decode()
    (node,) = collect_from(monkeypatch, events)
    assert node.repair_history is None and node.repairs is not None


def test_a_stop_that_failed_says_so_in_the_table():
    failed = METRICS.replace('action="none"} 1000001.0', 'action="stop"} 1000001.0') + (
        'gpufleet_guard_final_action_ok{reason="spot",action="stop"} 0\n')
    node = from_metrics("gpu-a", failed)
    assert (node.last_action, node.final_action_ok) == ("stop", False)
    assert "spot -> stop FAILED, checkpoint NOT landed" in _command.table([node], now=1000000.0)
    stopped = from_metrics("gpu-a", failed.replace("action=\"stop\"} 0", "action=\"stop\"} 1"))
    assert stopped.final_action_ok is True
    assert "spot -> stop, checkpoint" in _command.table([stopped], now=1000000.0)
    # A daemon that does not write the metric: unknown, not failed.
    assert from_metrics("gpu-a", METRICS).final_action_ok is None


def test_a_cap_of_nan_is_no_cap_and_a_missing_cap_is_unknown():
    assert from_metrics("gpu-a", METRICS).capped is True
    assert from_metrics("gpu-b", BLIND).capped is False
    without = "\n".join(line for line in BLIND.splitlines() if not line.startswith("gpufleet_guard_spend_cap"))
    node = from_metrics("gpu-b", without)
    assert node.capped is None
    assert "no price known, cap unknown" in _command.table([node], now=1000000.0).splitlines()[1]


def test_json_and_the_exit_code(fleet, tmp_path, capsys):
    args = Namespace(inventory="inv", limit=None, quiet=True, format="json")
    assert _command.run(tmp_path, args) == 12
    out = json.loads(capsys.readouterr().out)
    assert out["exit_code"] == 12 and [n["host"] for n in out["nodes"]][:2] == ["cpu-c", "gpu-a"]
    assert out["nodes"][2]["spend"] is None  # gpu-b: unknown is null, not 0


def test_no_node_answering_is_an_error_that_says_what_to_check(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(_command._ansible, "run_playbook", lambda *a, **k: (1, "failed"))
    args = Namespace(inventory="inventories/nowhere", limit=None, quiet=True, format="table")
    assert _command.run(tmp_path, args) == 4
    assert "ansible-inventory -i inventories/nowhere --graph" in capsys.readouterr().err


def test_a_line_that_is_not_a_sample_is_refused_by_number():
    with pytest.raises(ValueError, match="line 2"):
        parse("gpufleet_guard_idle_seconds 1.0\nnot a sample at all\n")


@pytest.mark.parametrize("metrics, said", [
    # A price and no cap: the spend, and that no cap is set.
    (BLIND.replace("price_per_hour NaN", "price_per_hour 2.5").replace('spend{scope="node"} NaN',
                                                                       'spend{scope="node"} 12.5'), "12.50, no cap set"),
    # A price, a cap, and a spend that could not be worked out.
    (METRICS.replace('spend{scope="node"} 320.5', 'spend{scope="node"} NaN').replace(
        'state="alarm"} 1', 'state="alarm"} 0\ngpufleet_guard_budget_state{state="unknown"} 1'),
     "spend unknown of cap 400.00"),
    # A daemon from before the price was published: no claim about it.
    (BLIND.replace("gpufleet_guard_price_per_hour NaN\n", ""), "spend unknown, no cap set"),
])
def test_the_spend_column_reads_plainly(metrics, said):
    assert _command._spend(from_metrics("gpu-x", metrics)) == said
