"""The guard daemon end to end on this machine: configuration errors by
name, a poll against the loopback metadata service with stand-ins for the
node's reads, events handled once across restarts, and the metrics it
writes, where unknown is NaN and never 0."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from tests.emulators.instance_metadata import Metadata, running

from ...conftest import load_helper
from .fakes import Clock

load_helper("guard", "gpufleet_guard_notice.py", "gpufleet_guard_notice")
load_helper("guard", "gpufleet_guard_probes.py", "gpufleet_guard_probes")
load_helper("guard", "gpufleet_guard_triggers.py", "gpufleet_guard_triggers")
load_helper("guard", "gpufleet_guard_actions.py", "gpufleet_guard_actions")
load_helper("guard", "gpufleet_guard_maintenance.py", "gpufleet_guard_maintenance")
load_helper("guard", "gpufleet_guard_repair.py", "gpufleet_guard_repair")
guard = load_helper("guard", "gpufleet_guard.py", "gpufleet_guard")

NOTICE = json.dumps({"action": "terminate", "time": "2026-12-03T04:05:33Z"})
DEADLINE = datetime.datetime(2026, 12, 3, 4, 5, 33, tzinfo=datetime.timezone.utc).timestamp()


class Node:
    """The node's reads, as the test sets them."""

    def __init__(self):
        self.boot_value = ("boot-1", 100.0)
        self.utilization = [0.0, 0.0]
        self.units = {}
        self.ssh = False
        self.job = None

    def boot(self):
        return self.boot_value

    def unit_active(self, unit):
        return self.units.get(unit, False)

    def ssh_sessions(self):
        return self.ssh

    def file_touched(self, path, within, now):
        return False

    def gpu_utilization(self, nvidia_smi):
        return self.utilization

    def job_seconds(self, unit):
        return self.job


class Commands:
    """Stands in for subprocess.run: records argv; exit status 0 unless
    ``answers`` gives the program's."""

    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or {}

    def __call__(self, argv, **kwargs):
        import subprocess

        self.calls.append(argv)
        return subprocess.CompletedProcess(argv, self.answers.get(argv[0], 0), "", "")


def config_file(tmp_path, **changes):
    raw = {
        "cloud": "aws", "spot": True, "metadata_endpoint": None, "poll_seconds": 5,
        "idle": {"enabled": True, "threshold_percent": 10, "window_seconds": 600, "grace_seconds": 1800,
                 "units": ["train.service"], "ssh": True, "activity_file": ""},
        "budget": {"price_per_hour": None, "node_cap": None, "job_cap": None, "alarm_ratio": 0.8, "job_unit": ""},
        "actions": {"marker_path": str(tmp_path / "run" / "event.json"), "job_units": ["train.service"],
                    "checkpoint_seconds": 300, "final_action": "none"},
        "state_path": str(tmp_path / "state" / "state.json"), "textfile_dir": str(tmp_path / "textfile"),
        "nvidia_smi": "/usr/bin/nvidia-smi",
    }
    for key, value in changes.items():
        if isinstance(value, dict):
            raw[key] = {**raw.get(key, {}), **value}
        else:
            raw[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


def metrics(tmp_path):
    return (tmp_path / "textfile" / "gpufleet_guard.prom").read_text()


def make(tmp_path, url=None, clock=None, node=None, commands=None, **changes):
    config = guard.load_config(config_file(tmp_path, metadata_endpoint=url, **changes))
    return guard.Guard(config, clock=clock or Clock(), read=node or Node(), pipeline_run=commands or Commands())


def test_a_spot_notice_is_acted_on_once_even_across_a_restart(tmp_path):
    meta = Metadata("aws")
    meta.notice = NOTICE
    commands, node, clock = Commands(), Node(), Clock()
    node.utilization = [90.0, 85.0]
    with running(meta) as url:
        first = make(tmp_path, url, clock, node, commands).poll()
        clock.now += 5
        make(tmp_path, url, clock, node, commands).poll()  # a restarted daemon, same notice
    assert [e.reason for e in first["events"]] == ["spot"]
    assert commands.calls == [["systemctl", "kill", "--signal=SIGTERM", "--kill-whom=main", "train.service"]]
    # The record that kept the second daemon from acting again: root's only,
    # and the only file in its directory (no temporary left behind).
    state = tmp_path / "state" / "state.json"
    assert oct(state.stat().st_mode & 0o777) == "0o600" and list(json.loads(state.read_text())["events"])
    assert os.listdir(state.parent) == ["state.json"]
    marker = json.loads((tmp_path / "run" / "event.json").read_text())
    assert marker["reason"] == "spot" and marker["deadline_utc"] == "2026-12-03T04:05:33Z"
    text = metrics(tmp_path)
    assert 'gpufleet_guard_spot_state{cloud="aws",state="notice"} 1' in text
    assert f'gpufleet_guard_spot_deadline_timestamp_seconds{{cloud="aws"}} {DEADLINE!r}' in text
    assert 'gpufleet_guard_last_event_timestamp_seconds{reason="spot",action="none"}' in text
    assert 'gpufleet_guard_checkpoint_landed{reason="spot"} NaN' in text  # no hook: unknown, not 0 or 1
    assert 'gpufleet_guard_final_action_ok{reason="spot",action="none"} NaN' in text  # nothing to go through


@pytest.mark.parametrize(("rc", "shown"), [(0, "1"), (2, "0")])
def test_whether_the_stop_went_through_is_a_metric(tmp_path, rc, shown):
    # 0 is the case to alert on: the node still runs, and is billed.
    meta = Metadata("aws")
    meta.notice = NOTICE
    commands = Commands(answers={"/usr/local/bin/stop-me": rc})
    with running(meta) as url:
        make(tmp_path, url, commands=commands,
             actions={"final_action": "stop", "stop_command": ["/usr/local/bin/stop-me"]}).poll()
    assert ["/usr/local/bin/stop-me"] in commands.calls
    assert f'gpufleet_guard_final_action_ok{{reason="spot",action="stop"}} {shown}' in metrics(tmp_path)


@pytest.mark.parametrize("fault", ["500", "garbage", "drop"])
def test_a_metadata_service_that_fails_is_reported_unknown_and_does_nothing(tmp_path, fault):
    meta = Metadata("aws")
    meta.notice, meta.fault = NOTICE, fault
    commands = Commands()
    with running(meta) as url:
        result = make(tmp_path, url, commands=commands).poll()
    assert result["events"] == [] and commands.calls == []
    text = metrics(tmp_path)
    assert 'gpufleet_guard_spot_state{cloud="aws",state="unknown"} 1' in text
    assert 'gpufleet_guard_spot_deadline_timestamp_seconds{cloud="aws"} NaN' in text


def test_idle_gpus_for_the_window_act_once_with_the_checkpoint_time(tmp_path):
    clock, node, commands = Clock(), Node(), Commands()
    node.utilization = [95.0, 99.0]
    daemon = make(tmp_path, clock=clock, node=node, commands=commands, spot=False)
    daemon.poll()
    node.utilization = [1.0, 0.0]
    for _poll in range(0, 660, 60):  # the first quiet poll starts the spell
        clock.now += 60
        result = daemon.poll()
    assert [e.reason for e in result["events"]] == ["idle"]
    assert result["events"][0].deadline == clock.now + 300
    clock.now += 60
    daemon.poll()
    assert len(commands.calls) == 1, "the same idle spell is one event"
    assert "gpufleet_guard_idle_seconds 660.0" in metrics(tmp_path)
    # Activity ends the spell; a new one is a new event.
    node.units["train.service"] = True
    clock.now += 60
    daemon.poll()
    node.units["train.service"] = False
    for _poll in range(0, 660, 60):
        clock.now += 60
        daemon.poll()
    assert len(commands.calls) == 2


def test_utilization_that_cannot_be_read_never_stops_an_idle_node(tmp_path):
    clock, node, commands = Clock(), Node(), Commands()
    node.utilization, node.boot_value = None, ("boot-1", 10**6)  # long past the grace period
    daemon = make(tmp_path, clock=clock, node=node, commands=commands, spot=False)
    for _poll in range(200):
        clock.now += 60
        assert daemon.poll()["events"] == []
    assert commands.calls == [] and "gpufleet_guard_idle_seconds 0.0" in metrics(tmp_path)


def test_the_spend_cap_counts_every_boot_and_survives_a_restart(tmp_path):
    clock, node, commands = Clock(), Node(), Commands()
    budget = {"price_per_hour": 3.6, "node_cap": 10.0}
    node.boot_value = ("boot-1", 6000.0)  # 6.00 spent
    make(tmp_path, clock=clock, node=node, commands=commands, spot=False, budget=budget).poll()
    assert 'gpufleet_guard_spend{scope="node"} 6.0' in metrics(tmp_path)
    node.boot_value = ("boot-2", 2000.0)  # stopped, started again: 8.00, past the 80 % alarm
    result = make(tmp_path, clock=clock, node=node, commands=commands, spot=False, budget=budget).poll()
    assert result["budget"].state == "alarm" and result["events"] == []
    assert 'gpufleet_guard_budget_state{state="alarm"} 1' in metrics(tmp_path)
    node.boot_value = ("boot-2", 4000.0)  # 10.00: the cap
    result = make(tmp_path, clock=clock, node=node, commands=commands, spot=False, budget=budget).poll()
    assert [e.reason for e in result["events"]] == ["budget"] and len(commands.calls) == 1
    node.boot_value = ("boot-2", 4100.0)
    make(tmp_path, clock=clock, node=node, commands=commands, spot=False, budget=budget).poll()
    assert len(commands.calls) == 1, "the cap is one event"


def test_no_price_leaves_the_spend_unknown_not_zero(tmp_path):
    make(tmp_path, spot=False).poll()
    text = metrics(tmp_path)
    assert 'gpufleet_guard_budget_state{state="unknown"} 1' in text
    assert 'gpufleet_guard_spend{scope="node"} NaN' in text


@pytest.mark.parametrize(("changes", "message"), [
    ({"cloud": "gcp"}, "spot is on, so cloud must be one of aliyun, aws, huawei, tencent, not 'gcp'"),
    ({"state_path": None}, "state_path"),
    ({"actions": {"final_action": "terminate"}}, "final_action must be one of none, stop, poweroff"),
    ({"poll_seconds": 0}, "poll_seconds must be above 0"),
    ({"idle": {"threshold_percent": "ten"}}, "could not convert string to float: 'ten'"),
])
def test_a_bad_configuration_fails_by_name_before_any_poll(tmp_path, changes, message, capsys):
    path = config_file(tmp_path, **changes)
    if changes.get("state_path", 1) is None:
        raw = json.loads(open(path).read())
        del raw["state_path"]
        open(path, "w").write(json.dumps(raw))
    assert guard.main(["--config", path, "--once"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "textfile").exists()


def test_once_with_the_real_probes_on_this_machine(tmp_path, fake_nvidia_smi, capsys):
    # The real reads of /proc and a stand-in nvidia-smi: two quiet GPUs.
    meta = Metadata("tencent")
    smi = fake_nvidia_smi([{"utilization.gpu": 3}, {"utilization.gpu": "[N/A]"}])
    with running(meta) as url:
        path = config_file(tmp_path, cloud="tencent", metadata_endpoint=url, nvidia_smi=smi,
                           idle={"units": [], "ssh": False})
        assert guard.main(["--config", path, "--once"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["spot"]["state"] == "clear" and result["boot_known"] is True
    assert "unknown" in result["idle"]["reason"]  # one GPU said [N/A]


def test_a_node_that_is_not_spot_needs_no_cloud_and_says_so(tmp_path):
    result = make(tmp_path, spot=False, cloud="").poll()
    assert result["spot"].state == "off" and result["events"] == []
    assert 'gpufleet_guard_spot_state{cloud="",state="off"} 1' in metrics(tmp_path)


def test_gpufleet_guard_status_reads_what_the_daemon_writes(tmp_path):
    # The contract between the daemon's metrics and the CLI's fleet view.
    from gpufleet.guard._status import REPORTING, from_metrics

    meta = Metadata("aws")
    meta.notice = NOTICE
    node, clock = Node(), Clock()
    with running(meta) as url:
        make(tmp_path, url, clock, node, budget={"price_per_hour": 3.6, "node_cap": 10.0}).poll()
    seen = from_metrics("n1", metrics(tmp_path))
    assert seen.state == REPORTING and (seen.cloud, seen.spot, seen.spot_deadline) == ("aws", "notice", DEADLINE)
    assert (seen.idle_seconds, seen.idle_window_seconds, seen.idle_armed) == (0.0, 600.0, False)
    assert (seen.budget, seen.spend, seen.spend_cap) == ("ok", 0.1, 10.0)
    assert (seen.job_spend, seen.job_spend_cap) == (None, None)
    assert (seen.last_event, seen.last_action, seen.checkpoint_landed) == ("spot", "none", None)
    assert seen.last_poll_at == clock.now and seen.priced is True


def test_gpufleet_guard_status_reads_whether_a_price_is_known(tmp_path):
    # A price given: priced; none: "no price known", never an unknown spend alone.
    from gpufleet.guard._command import row
    from gpufleet.guard._status import from_metrics

    make(tmp_path, budget={"price_per_hour": 3.6}).poll()
    assert from_metrics("n1", metrics(tmp_path)).priced is True
    make(tmp_path, budget={"price_per_hour": None, "node_cap": None}).poll()
    seen = from_metrics("n1", metrics(tmp_path))
    assert seen.priced is False and seen.capped is False
    assert row(seen, now=seen.last_poll_at)[5] == "no price known, no cap set"  # the spend / cap column


# ---- scheduled maintenance ---------------------------------------------------

WINDOW = datetime.datetime(2026, 12, 9, 9, 0, 43, tzinfo=datetime.timezone.utc).timestamp()
SCHEDULED = json.dumps([{"NotBefore": "9 Dec 2026 09:00:43 GMT", "Code": "system-reboot",
                         "Description": "scheduled reboot", "EventId": "instance-event-0d59937288b749b32",
                         "NotAfter": "9 Dec 2026 09:17:23 GMT", "State": "active"}])
ON = {"maintenance": {"enabled": True, "lead_seconds": 1800}}
STOP = {"final_action": "stop", "stop_command": ["/usr/local/bin/stop-me"]}


def test_a_maintenance_window_checkpoints_its_lead_before_and_leaves_the_stop_to_the_cloud(tmp_path):
    """Read on a node that is not a spot node; nothing happens until the
    window is within its lead; then the marker, the signal and the hook
    run once (across a restart too), with the window's start as deadline,
    and the guard's own stop is not called: the cloud reboots the node."""
    meta = Metadata("aws")
    meta.maintenance = SCHEDULED
    commands, node, clock = Commands(), Node(), Clock(WINDOW - 3600)
    node.utilization = [90.0, 85.0]
    changes = dict(spot=False, actions=STOP, **ON)
    with running(meta) as url:
        early = make(tmp_path, url, clock, node, commands, **changes).poll()
        assert early["events"] == [] and commands.calls == []
        text = metrics(tmp_path)
        assert 'gpufleet_guard_maintenance_state{cloud="aws",state="scheduled"} 1' in text
        assert ('gpufleet_guard_maintenance_window_start_timestamp_seconds{code="system-reboot",'
                f'event_id="instance-event-0d59937288b749b32"}} {WINDOW!r}') in text
        clock.now = WINDOW - 1800
        due = make(tmp_path, url, clock, node, commands, **changes).poll()
        clock.now += 5
        make(tmp_path, url, clock, node, commands, **changes).poll()  # a restarted daemon, same window
    (event,) = due["events"]
    assert (event.reason, event.deadline) == ("maintenance", WINDOW)
    assert "system-reboot from 2026-12-09T09:00:43Z to 2026-12-09T09:17:23Z" in event.detail
    assert commands.calls == [["systemctl", "kill", "--signal=SIGTERM", "--kill-whom=main", "train.service"]]
    (record,) = json.loads((tmp_path / "state" / "state.json").read_text())["events"].values()
    assert record["final"] == {"action": "none", "detail": "the maintenance is the cloud's own final action"}
    marker = json.loads((tmp_path / "run" / "event.json").read_text())
    assert marker["reason"] == "maintenance" and marker["deadline_utc"] == "2026-12-09T09:00:43Z"
    assert 'gpufleet_guard_last_event_timestamp_seconds{reason="maintenance",action="none"}' in metrics(tmp_path)


def test_unknown_maintenance_is_no_event_and_a_metric_of_its_own(tmp_path):
    meta = Metadata("aws")
    meta.maintenance = "not json"
    commands = Commands()
    with running(meta) as url:
        result = make(tmp_path, url, commands=commands, spot=False, **ON).poll()
    assert result["events"] == [] and commands.calls == []
    text = metrics(tmp_path)
    assert 'gpufleet_guard_maintenance_state{cloud="aws",state="unknown"} 1' in text
    assert 'gpufleet_guard_maintenance_state{cloud="aws",state="clear"} 0' in text


def test_maintenance_off_or_not_read_is_said_and_nothing_is_asked(tmp_path):
    meta = Metadata("aws")
    meta.maintenance = SCHEDULED
    with running(meta) as url:
        make(tmp_path, url, spot=False).poll()
    assert not [c for c in meta.calls if "maintenance" in c[1]]
    assert 'gpufleet_guard_maintenance_state{cloud="aws",state="off"} 1' in metrics(tmp_path)
    assert "gpufleet_guard_maintenance_unreadable_events NaN" in metrics(tmp_path)
    make(tmp_path, None, cloud="tencent", spot=False, **ON).poll()
    assert 'gpufleet_guard_maintenance_state{cloud="tencent",state="not_read"} 1' in metrics(tmp_path)


def test_a_maintenance_lead_of_zero_is_refused_by_name(tmp_path):
    with pytest.raises(guard.ConfigError, match="maintenance.lead_seconds must be above 0"):
        guard.load_config(config_file(tmp_path, maintenance={"enabled": True, "lead_seconds": 0}))
    for key in ("interval_seconds", "timeout_seconds"):
        with pytest.raises(guard.ConfigError, match=f"maintenance.{key} must be above 0, not -1"):
            guard.load_config(config_file(tmp_path, maintenance={"enabled": True, key: -1}))


def test_an_api_clouds_event_is_read_through_the_instance_program_and_checkpoints_before_its_window(tmp_path):
    """Alibaba: the program's `events` run in the background (a stand-in
    that prints ECS's event as DescribeInstanceHistoryEvents lists it);
    the first poll does not wait for it and reads unknown; once it has
    answered, the window is an event its lead before it starts."""
    program = tmp_path / "instance-program"
    event = {"EventId": "e-bp1aliyun0001", "EventType": {"Code": 1, "Name": "SystemMaintenance.Reboot"},
             "EventCycleStatus": {"Code": 24, "Name": "Scheduled"}, "NotBefore": "2026-12-09T09:00:43Z"}
    report = json.dumps({"outcome": "read", "events": [event]})
    program.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/argv\ncat <<'EOF'\n{report}\nEOF\n")
    program.chmod(0o755)
    commands, node, clock = Commands(), Node(), Clock(WINDOW - 1800)
    node.utilization = [90.0, 85.0]
    daemon = make(tmp_path, None, clock, node, commands, cloud="aliyun", spot=False, actions=STOP,
                  maintenance={"enabled": True, "lead_seconds": 1800, "command": [str(program), "stop.json"]})
    first = daemon.poll()
    assert first["events"] == [] and first["maintenance"].state == "unknown"
    daemon.maintenance_reader.wait(10)
    clock.now += 5
    (event,) = daemon.poll()["events"]
    assert (event.reason, event.deadline) == ("maintenance", WINDOW)
    assert event.event_id == "maintenance-e-bp1aliyun0001" and "SystemMaintenance.Reboot from" in event.detail
    assert (tmp_path / "argv").read_text() == "stop.json events\n"
    assert 'gpufleet_guard_maintenance_state{cloud="aliyun",state="scheduled"} 1' in metrics(tmp_path)
    # The cloud reboots the node: the guard's own stop is not called.
    assert ["/usr/local/bin/stop-me"] not in commands.calls


def test_an_api_cloud_without_the_instance_program_says_why_it_is_not_read(tmp_path):
    why = "not read: Huawei Cloud's ListScheduledEvents needs guard_stop_instance_id and guard_stop_region"
    result = make(tmp_path, None, cloud="huawei", spot=False,
                  maintenance={"enabled": True, "lead_seconds": 1800, "not_read": why}).poll()
    assert (result["maintenance"].state, result["maintenance"].detail) == ("not_read", why)


# The repair ladder in the daemon (its decisions: test_gpufleet_guard_repair.py).
BREAKER = ["/usr/local/bin/breaker"]


def health_report(tmp_path, at, *faults):
    path = tmp_path / "health" / "report.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"time": datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat(),
                                "faults": list(faults)}))
    return str(path)


def xid13(last, tripped=True):
    return {"kind": "xid", "code": 13, "pci": "00000000:3B:00.0", "class": "RESTART_APP", "step": "restart_app",
            "count": 3, "undated": 0, "last": last, "tripped": tripped, "detail": "Graphics Engine Exception"}


def test_a_tripped_fault_of_a_class_turned_on_is_checkpointed_then_its_rung_taken(tmp_path):
    commands, clock = Commands(), Clock()
    report = health_report(tmp_path, clock.now, xid13(clock.now - 30))
    repair = {"classes": ["RESTART_APP"], "report_path": report, "breaker_command": BREAKER}
    meta = Metadata("aws")
    repairs = tmp_path / "run" / "repairs.json"
    with running(meta) as url:
        result = make(tmp_path, url, clock, commands=commands, spot=False, repair=repair,
                      repairs_path=str(repairs)).poll()
    assert result["repair"]["report"] == ""
    # The breaker, the checkpoint's signal (the pipeline's event), the job
    # stopped, node_health started to read the node again.
    (repair_id,) = json.loads((tmp_path / "state" / "state.json").read_text())["repairs"]
    assert commands.calls == [
        [*BREAKER, "acquire", repair_id],
        ["systemctl", "kill", "--signal=SIGTERM", "--kill-whom=main", "train.service"],
        ["systemctl", "stop", "train.service"],
        ["systemctl", "start", "--no-block", "gpufleet-health.service"],
    ]
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    event = state["events"][f"repair-{repair_id}"]
    assert event["reason"] == "repair" and event["final"]["action"] == "none"
    assert "RESTART_APP fault xid-13-00000000:3B:00.0" in event["detail"]
    assert state["repairs"][repair_id]["state"] == "verifying"
    text = metrics(tmp_path)
    assert ('gpufleet_guard_repair_state{fault="xid-13-00000000:3B:00.0",class="RESTART_APP",'
            'rung="restart_app",state="verifying"} 1') in text
    assert 'gpufleet_guard_repairs{state="verifying"} 1' in text
    assert 'gpufleet_guard_repairs{state="cleared"} 0' in text
    assert 'gpufleet_guard_repair_report_readable 1' in text
    # What `gpufleet guard status` reads: readable by all, each repair with
    # why it is where it is and its steps.
    assert oct(repairs.stat().st_mode & 0o777) == "0o644"
    (shown,) = json.loads(repairs.read_text())["repairs"]
    assert (shown["id"], shown["state"], shown["why"]) == (repair_id, "verifying", "waiting for a node_health report")
    assert [step["step"] for step in shown["steps"]] == ["breaker", "checkpoint", "restart_app"]


def test_mtbi_and_mttr_counters_count_each_repair_and_the_time_each_cleared_one_took(tmp_path):
    """The counters the monitoring role's recording rules divide: one
    incident per repair, the cleared ones and the seconds each took from
    its opening to its clearing, labelled with the breaker group; the time
    watched counts from the first poll with repair on, across restarts."""
    commands, clock = Commands(), Clock()
    start = clock.now
    report = health_report(tmp_path, clock.now, xid13(clock.now - 30))
    repair = {"classes": ["RESTART_APP"], "report_path": report, "breaker_command": BREAKER, "group": "a100"}
    with running(Metadata("aws")) as url:
        make(tmp_path, url, clock, commands=commands, spot=False, repair=repair).poll()
        text = metrics(tmp_path)
        assert f'gpufleet_guard_repair_watched_since_timestamp_seconds{{group="a100"}} {start!r}' in text
        assert 'gpufleet_guard_repair_incidents_total{group="a100"} 1' in text
        assert "# TYPE gpufleet_guard_repair_incidents_total counter" in text
        assert 'gpufleet_guard_repair_cleared_total{group="a100"} 0' in text
        assert 'gpufleet_guard_repair_cleared_seconds_total{group="a100"} 0.0' in text
        # Two minutes on, a report with no occurrence since the rung clears
        # it; a restarted daemon keeps the time watched from the first poll.
        clock.now += 120
        health_report(tmp_path, clock.now, xid13(start - 30))
        make(tmp_path, url, clock, commands=commands, spot=False, repair=repair).poll()
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert [r["state"] for r in state["repairs"].values()] == ["cleared"]
    text = metrics(tmp_path)
    assert f'gpufleet_guard_repair_watched_since_timestamp_seconds{{group="a100"}} {start!r}' in text
    assert 'gpufleet_guard_repair_incidents_total{group="a100"} 1' in text
    assert 'gpufleet_guard_repair_cleared_total{group="a100"} 1' in text
    assert 'gpufleet_guard_repair_cleared_seconds_total{group="a100"} 120.0' in text


def test_a_class_not_turned_on_is_a_metric_and_no_action(tmp_path):
    commands, clock = Commands(), Clock()
    report = health_report(tmp_path, clock.now, xid13(clock.now - 30))
    repair = {"classes": ["RESTART_VM"], "report_path": report, "breaker_command": BREAKER}
    with running(Metadata("aws")) as url:
        make(tmp_path, url, clock, commands=commands, spot=False, repair=repair).poll()
    assert commands.calls == []
    text = metrics(tmp_path)
    assert ('gpufleet_guard_repair_report_only{fault="xid-13-00000000:3B:00.0",class="RESTART_APP",'
            'step="restart_app"} 1') in text
    assert "gpufleet_guard_repair_state{" not in text


def test_repair_off_reads_no_report_and_writes_no_repair_metric(tmp_path):
    commands, clock = Commands(), Clock()
    with running(Metadata("aws")) as url:
        result = make(tmp_path, url, clock, commands=commands, spot=False,
                      repairs_path=str(tmp_path / "run" / "repairs.json")).poll()
    assert result["repair"] is None and "gpufleet_guard_repair" not in metrics(tmp_path)
    assert not (tmp_path / "run" / "repairs.json").exists()


def test_an_unreadable_report_is_a_metric(tmp_path):
    repair = {"classes": ["RESTART_APP"], "report_path": str(tmp_path / "missing.json"), "breaker_command": BREAKER}
    with running(Metadata("aws")) as url:
        result = make(tmp_path, url, spot=False, repair=repair).poll()
    assert "no node_health report" in result["repair"]["report"]
    assert "gpufleet_guard_repair_report_readable 0" in metrics(tmp_path)


@pytest.mark.parametrize(("classes", "message"), [
    (["IGNORE"], "IGNORE asks for no repair step"),
    (["RESTART_APP", "REBOOT"], "'REBOOT' is not a class of NVIDIA's XID catalogue"),
    ("RESTART_APP", "must be a list of classes"),
])
def test_a_bad_repair_class_is_refused_by_name(tmp_path, classes, message):
    with pytest.raises(guard.ConfigError, match=message):
        guard.load_config(config_file(tmp_path, repair={"classes": classes, "report_path": "/r.json"}))
