"""The repair ladder (gpufleet_guard_repair) as a decision table: each
rung, what clears a fault and what takes the next rung, and every unknown
(a report that cannot be read or is old, lines without a time, a breaker
or nvidia-smi that does not answer, a reboot that does not come) holding
the repair where it is, without an action. The commands are stand-ins;
the report is a file shaped as node_health writes it."""

from __future__ import annotations

import datetime
import json
import re
import subprocess

import pytest

from ...conftest import load_helper
from .fakes import Clock

load_helper("guard", "gpufleet_guard_actions.py", "gpufleet_guard_actions")
repair = load_helper("guard", "gpufleet_guard_repair.py", "gpufleet_guard_repair")

SMI = "/usr/bin/nvidia-smi"
REBOOT = ("/opt/gpufleet/guard-sdk/bin/python3", "gpufleet_guard_stop.py", "/etc/gpufleet/guard/stop.json")
BREAKER = ("/opt/gpufleet/guard-sdk/bin/python3", "gpufleet_guard_breaker.py", "/etc/gpufleet/guard/breaker.json")
PCI = "00000000:3B:00.0"
BOOT = ("boot-1", 3600.0)


class Node:
    """The commands the ladder runs, answered by what they start with;
    each answer is (rc, stdout), or "timeout"; a list is used up in turn."""

    def __init__(self, **answers):
        self.answers = {"breaker": (0, ""), "query": (0, ""), "reset": (0, ""), "reboot": (0, ""),
                        "systemctl": (0, ""), **answers}
        self.calls = []

    def name(self, argv):
        if argv[:2] == list(BREAKER[:2]):
            return "breaker"
        if argv[0] == SMI:
            return "reset" if "--gpu-reset" in argv else "query"
        return "reboot" if argv[:2] == list(REBOOT[:2]) else argv[0]

    def __call__(self, argv, **kwargs):
        name = self.name(argv)
        self.calls.append((name, argv))
        answer = self.answers[name]
        if isinstance(answer, list):
            answer = answer.pop(0)
        if answer == "timeout":
            raise subprocess.TimeoutExpired(argv, kwargs.get("timeout"))
        return subprocess.CompletedProcess(argv, answer[0], answer[1], "" if answer[0] == 0 else "refused")

    def made(self, *names):
        return [name for name, _argv in self.calls if name in names]


class Job:
    def __init__(self):
        self.checkpoints, self.stops = [], 0

    def checkpoint(self, event_id, detail):
        self.checkpoints.append((event_id, detail))
        return {"event": event_id, "landed": True}

    def stop(self):
        self.stops += 1
        return {"ok": True, "targets": {"unit:train.service": {"rc": 0}}}


def fault(kind="xid", code=13, cls="RESTART_APP", step="restart_app", pci=PCI, last=None, undated=0, tripped=True):
    return {"kind": kind, "code": code, "pci": pci, "class": cls, "step": step, "count": 3, "undated": undated,
            "last": last, "tripped": tripped, "detail": "Graphics Engine Exception"}


def missing_gpu(at):
    return fault(kind="gpu_missing", code=None, pci="", cls="RESTART_VM", step="reboot", last=at)


def opened(ladder, tmp_path, clock, tripped=None, boot=BOOT):
    """A report with one tripped fault (XID 13 a minute ago unless given),
    read by a poll; the report's path."""
    report = tmp_path / "report.json"
    write_report(report, clock.now, tripped or fault(last=clock.now - 60))
    ladder.poll(clock.now, boot)
    return report


def write_report(path, at, *faults):
    path.write_text(json.dumps({"time": datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat(),
                                "status": "fail", "faults": list(faults)}))


@pytest.fixture
def setup(tmp_path):
    def make(classes=("RESTART_APP", "RESET_GPU", "RESTART_VM"), node=None, records=None, breaker=True,
             reboot=True):
        config = repair.RepairConfig(classes=tuple(classes), report_path=str(tmp_path / "report.json"),
                                     verify_seconds=1800, reboot_wait_seconds=900, nvidia_smi=SMI,
                                     reboot_command=REBOOT if reboot else (),
                                     breaker_command=BREAKER if breaker else ())
        node = node or Node()
        job = Job()
        records = {} if records is None else records
        saves = []
        ladder = repair.Ladder(config, records, lambda: saves.append(json.dumps(records)), job.checkpoint,
                               job.stop, run=node, sleep=lambda _s: None)
        return ladder, node, job, records, saves
    return make


def only(records):
    (record,) = records.values()
    return record


def test_a_class_not_turned_on_is_reported_and_left_alone(setup, tmp_path):
    ladder, node, job, records, _saves = setup(classes=("RESET_GPU",))
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now, fault(last=clock.now - 60))
    seen = ladder.poll(clock.now, BOOT)
    assert seen["report_only"] == [{"fault": f"xid-13-{PCI}", "class": "RESTART_APP", "step": "restart_app"}]
    assert records == {} and node.calls == [] and job.checkpoints == []


def test_a_fault_below_its_threshold_starts_nothing(setup, tmp_path):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now, fault(last=clock.now - 60, tripped=False))
    ladder.poll(clock.now, BOOT)
    assert records == {} and node.calls == []


def test_a_health_check_that_would_not_start_is_said_while_the_repair_waits(setup, tmp_path):
    # node_health's unit refused: every poll that finds no newer report
    # says so, not only the one that took the rung, and so does the hold
    # when the wait runs out.
    ladder, _node, _job, records, _saves = setup(node=Node(systemctl=(5, "")))
    clock = Clock()
    opened(ladder, tmp_path, clock)
    record = only(records)
    assert "starting gpufleet-health.service failed: refused; its timer runs it" in record["why"], record["why"]
    for _poll in range(3):
        clock.now += 30
        ladder.poll(clock.now, BOOT)
        assert record["state"] == repair.VERIFYING, record
        assert record["why"].startswith("no node_health report written since the step"), record["why"]
        assert "starting gpufleet-health.service failed" in record["why"], record["why"]
    clock.now += 1800
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.HELD, record
    # The hold says what ran out, then why no report came.
    assert re.search(r"since the step within \d+ s \(starting gpufleet-health.service failed: refused", record["why"]), record


def test_restart_app_checkpoints_stops_the_job_and_clears_on_a_clean_report(setup, tmp_path):
    ladder, node, job, records, saves = setup()
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    record = only(records)
    # The breaker first, then the checkpoint, then the rung; node_health is
    # started to read the node again.
    assert [s["step"] for s in record["steps"]] == ["breaker", "checkpoint", "restart_app"]
    assert job.checkpoints == [(f"repair-{record['id']}", f"RESTART_APP fault xid-13-{PCI}: Graphics Engine Exception")]
    assert job.stops == 1 and node.made("systemctl") == ["systemctl"]
    assert node.calls[0][1] == [*BREAKER, "acquire", record["id"]]
    assert record["state"] == repair.VERIFYING and len(saves) >= 3

    # The report from before the step proves nothing yet.
    clock.now += 30
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.VERIFYING and "no node_health report written since" in record["why"]
    # A report after the step with only the old line in its window: cleared,
    # and the breaker's place given back.
    write_report(report, clock.now, fault(last=clock.now - 90))
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.CLEARED and record["closed_at"] == clock.now
    assert node.calls[-1][1] == [*BREAKER, "release", record["id"]]
    assert job.stops == 1

    # The same old line, still in the window and still tripped, opens no new repair.
    clock.now += 60
    ladder.poll(clock.now, BOOT)
    assert len(records) == 1


def test_each_rung_not_clearing_takes_the_next_up_to_replacement(setup, tmp_path):
    node = Node(query=[(0, ""), (0, "4242\n")], reboot=(0, ""))
    ladder, node, job, records, _saves = setup(node=node)
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    record = only(records)

    # Seen again after restart_app: the GPU reset, no process holding it.
    clock.now += 60
    write_report(report, clock.now, fault(last=clock.now - 5))
    ladder.poll(clock.now, BOOT)
    assert record["rung"] == "reset_gpu" and record["state"] == repair.VERIFYING
    assert [argv for name, argv in node.calls if name == "reset"] == [[SMI, "--gpu-reset", "-i", PCI]]
    assert record["why"].startswith("waiting") and job.stops == 1  # the job was stopped once, by restart_app

    # Seen again after the reset: a reboot through the cloud, recorded with
    # the boot it came from.
    clock.now += 60
    write_report(report, clock.now, fault(last=clock.now - 5))
    ladder.poll(clock.now, BOOT)
    assert record["rung"] == "reboot" and node.made("reboot") == ["reboot"]
    assert [argv for name, argv in node.calls if name == "reboot"] == [[*REBOOT, "reboot"]]
    assert record["steps"][-1]["boot_before"] == "boot-1" and record["steps"][-1]["ok"] is True

    # Back in a new boot; the fault comes again after it: replacement, the
    # last rung. The node keeps its place in the breaker.
    clock.now += 300
    ladder.poll(clock.now, ("boot-2", 120.0))
    assert record["state"] == repair.VERIFYING and record["since"] == clock.now - 120
    write_report(report, clock.now, fault(last=clock.now - 10))
    ladder.poll(clock.now, ("boot-2", 120.0))
    assert record["state"] == repair.EXHAUSTED and record["steps"][-1]["step"] == "replace"
    assert [s["step"] for s in record["steps"]] == [
        "breaker", "checkpoint", "restart_app", "reset_gpu", "reboot", "replace"]
    assert "release" not in [argv[-2] for name, argv in node.calls if name == "breaker"]
    assert job.checkpoints and len(job.checkpoints) == 1


def test_the_kernels_address_of_a_gpu_is_given_to_nvidia_smi_with_its_function(setup, tmp_path):
    ladder, node, _job, _records, _saves = setup()
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now,
                 fault(code=62, cls="RESET_GPU", step="reset_gpu", pci="0000:3b:00", last=clock.now))
    ladder.poll(clock.now, BOOT)
    assert [argv[-1] for name, argv in node.calls if name in ("query", "reset")] == ["0000:3b:00.0"] * 2


def test_a_reset_is_skipped_for_a_gpu_a_process_holds_and_the_reboot_follows(setup, tmp_path):
    ladder, node, job, records, _saves = setup(node=Node(query=(0, "4242\n4343\n")))
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now,
                 fault(kind="ecc_uncorrectable", code=None, cls="RESET_GPU", step="reset_gpu", last=clock.now))
    ladder.poll(clock.now, BOOT)
    record = only(records)
    # The job is stopped before the reset; the GPU still held, no reset.
    assert job.stops == 1 and node.made("reset") == []
    assert record["steps"][3] == {"step": "reset_gpu", "at": clock.now, "ok": False,
                                  "detail": "held by process(es) 4242, 4343"}
    assert record["rung"] == "reboot" and node.made("reboot") == ["reboot"]


def test_which_processes_hold_the_gpu_unknown_is_no_reset_and_no_reboot(setup, tmp_path):
    ladder, node, _job, records, _saves = setup(classes=("WORKFLOW_XID_48",),
                                                node=Node(query=[(9, ""), "timeout", (0, "")]))
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now,
                 fault(code=48, cls="WORKFLOW_XID_48", step="reset_gpu", last=clock.now))
    ladder.poll(clock.now, BOOT)
    record = only(records)
    assert record["state"] == repair.HELD and "is unknown" in record["why"]
    assert node.made("reset", "reboot") == []
    # Held: nothing is tried again before verify_seconds; then once more.
    clock.now += 600
    ladder.poll(clock.now, BOOT)
    assert node.made("query") == ["query"]
    clock.now += 1800
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.HELD and "timed out" in record["why"]
    clock.now += 1800
    ladder.poll(clock.now, BOOT)
    assert node.made("reset") == ["reset"] and record["state"] == repair.VERIFYING


@pytest.mark.parametrize(("listed", "reset"), [("No running processes found\n", True), ("", True),
                                               ("[Insufficient Permissions]\n", False)])
def test_what_nvidia_smi_lists_for_a_gpu_without_processes(setup, tmp_path, listed, reset):
    ladder, node, _job, records, _saves = setup(node=Node(query=(0, listed)))
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now,
                 fault(kind="ecc_uncorrectable", code=None, cls="RESET_GPU", step="reset_gpu", last=clock.now))
    ladder.poll(clock.now, BOOT)
    assert (node.made("reset") == ["reset"]) is reset
    assert only(records)["state"] == (repair.VERIFYING if reset else repair.HELD)


def test_a_fault_without_a_gpu_starts_at_the_reboot(setup, tmp_path):
    ladder, node, job, records, _saves = setup()
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    record = only(records)
    assert [s["step"] for s in record["steps"]] == ["breaker", "checkpoint", "reboot"]
    assert job.stops == 0 and node.made("reboot") == ["reboot"]


def test_a_reboot_that_never_comes_takes_the_next_rung_after_the_wait(setup, tmp_path):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    record = only(records)
    clock.now += 900
    ladder.poll(clock.now, BOOT)
    # Still the boot the reboot was called from: waiting for it, not judging.
    assert record["state"] == repair.VERIFYING and "since" not in record
    assert record["why"] == "waiting for the node to come back from its reboot"
    assert node.made("reboot") == ["reboot"]
    clock.now += 1
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.EXHAUSTED and record["rung"] == "replace"
    assert node.made("reboot") == ["reboot"]


def test_a_guard_restarted_in_the_same_boot_never_reboots_twice(setup, tmp_path):
    ladder, node, _job, records, _saves = setup(node=Node(reboot="timeout"))
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    record = only(records)
    # The call timed out three times: held, the call recorded as made.
    assert node.made("reboot") == ["reboot"] * 3 and record["state"] == repair.HELD
    assert record["steps"][-1]["boot_before"] == "boot-1" and record["steps"][-1]["attempts"] == 3

    # The daemon restarts (its state from disk) and the node did reboot after all.
    saved = json.loads(json.dumps(records))
    ladder2, node2, _job2, records2, _saves2 = setup(records=saved)
    clock.now += 2000
    ladder2.poll(clock.now, ("boot-2", 60.0))
    record2 = only(records2)
    assert node2.made("reboot") == [] and record2["state"] == repair.VERIFYING
    assert record2["since"] == clock.now - 60


def test_a_guard_stopped_during_the_reboot_call_waits_for_it_and_never_calls_again(setup, tmp_path):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    # As the state was saved just before the call: recorded, no outcome.
    saved = json.loads(json.dumps(records))
    (record,) = saved.values()
    record["steps"][-1].update(ok=None, detail="called")
    record.update(state=repair.ACTING, why="")
    ladder2, node2, _job2, records2, _saves2 = setup(records=saved)
    clock.now += 30
    ladder2.poll(clock.now, BOOT)
    assert node2.made("reboot") == [] and only(records2)["state"] == repair.VERIFYING
    assert "not made again" in only(records2)["steps"][-1]["detail"]
    clock.now += 60
    ladder2.poll(clock.now, ("boot-2", 50.0))
    assert node2.made("reboot") == [] and only(records2)["since"] == clock.now - 50


def test_a_guard_stopped_during_the_checkpoint_resumes_it_and_takes_the_rung(setup, tmp_path):
    ladder, _node, job, records, _saves = setup()
    clock = Clock()
    opened(ladder, tmp_path, clock)
    saved = json.loads(json.dumps(records))
    (record,) = saved.values()
    # Saved after the breaker's place, before the checkpoint's end.
    record.update(state=repair.ACTING, rung=None, steps=record["steps"][:1])
    ladder2, node2, job2, records2, _saves2 = setup(records=saved)
    ladder2.poll(clock.now + 5, BOOT)
    assert [s["step"] for s in only(records2)["steps"]] == ["breaker", "checkpoint", "restart_app"]
    assert len(job2.checkpoints) == 1 and job2.stops == 1 and node2.made("breaker") == []
    assert len(job.checkpoints) == 1


@pytest.mark.parametrize("rc", [2, 1])
def test_a_refused_reboot_is_held_after_the_tries_it_deserves(setup, tmp_path, rc):
    ladder, node, _job, records, _saves = setup(node=Node(reboot=(rc, "")))
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    record = only(records)
    assert record["state"] == repair.HELD and f"exit {rc}" in record["why"]
    # 2 says another try cannot help; 1 is tried three times.
    assert len(node.made("reboot")) == (1 if rc == 2 else 3)


def test_no_reboot_call_configured_is_held_and_named(setup, tmp_path):
    ladder, node, _job, records, _saves = setup(reboot=False)
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now))
    record = only(records)
    assert record["state"] == repair.HELD and "guard_stop_instance_id" in record["why"]
    assert node.made("reboot") == []


def test_an_unreadable_boot_reboots_nothing(setup, tmp_path):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    opened(ladder, tmp_path, clock, missing_gpu(clock.now), boot=None)
    assert only(records)["state"] == repair.HELD and node.made("reboot") == []


@pytest.mark.parametrize(("answer", "why"), [
    ((3, "2 of 2 nodes in repair"), "full"), ((1, ""), "unknown"), ("timeout", "unknown"), ((127, ""), "unknown")])
def test_no_place_in_the_breaker_or_no_answer_is_no_action(setup, tmp_path, answer, why):
    ladder, node, job, records, _saves = setup(node=Node(breaker=[answer, (0, "")]))
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now, fault(last=clock.now))
    ladder.poll(clock.now, BOOT)
    record = only(records)
    assert record["state"] == repair.WAITING and why in record["why"]
    assert job.checkpoints == [] and job.stops == 0 and node.made("breaker") == ["breaker"]
    # Asked again on the next poll; a place given, the ladder starts.
    clock.now += 5
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.VERIFYING and job.stops == 1


def test_no_breaker_configured_starts_no_repair(setup, tmp_path):
    ladder, node, job, records, _saves = setup(breaker=False)
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now, fault(last=clock.now))
    ladder.poll(clock.now, BOOT)
    assert only(records)["state"] == repair.WAITING and "no fleet breaker" in only(records)["why"]
    assert node.calls == [] and job.checkpoints == []


def test_lines_without_a_time_open_no_repair(setup, tmp_path):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    write_report(tmp_path / "report.json", clock.now, fault(last=None, undated=3))
    seen = ladder.poll(clock.now, BOOT)
    assert records == {} and node.calls == []
    assert seen["unknown"] == [{"fault": f"xid-13-{PCI}", "why": "tripped on lines without a time"}]


@pytest.mark.parametrize("unknown", [
    fault(kind="gpus_unreadable", code=None, pci="", cls="unknown", step="none", tripped=False),
    fault(kind="kernel_log_unreadable", code=None, pci="", cls="unknown", step="none", tripped=False),
])
def test_a_report_that_could_not_read_the_node_clears_nothing(setup, tmp_path, unknown):
    ladder, node, _job, records, _saves = setup()
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    record = only(records)
    clock.now += 60
    # The fault is gone from the report only because the node could not be read.
    write_report(report, clock.now, dict(unknown, last=clock.now))
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.HELD and unknown["kind"] in record["why"]
    clock.now += 60
    write_report(report, clock.now)
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.CLEARED and node.made("reset", "reboot") == []


def test_row_remaps_not_read_hold_a_row_remap_repair_and_no_other(setup, tmp_path):
    """A report whose row remaps could not be read says nothing of a
    pending remap's GPU; it still clears an XID fault by its lines."""
    unreadable = fault(kind="row_remap_unreadable", code=None, pci="", cls="unknown", step="none", tripped=False)
    pending = fault(kind="row_remap_pending", code=None, pci="00000000:3B:00.0", cls="RESET_GPU", step="reset_gpu")
    for tripped, cleared in ((pending, repair.HELD), (None, repair.CLEARED)):
        ladder, _node, _job, records, _saves = setup()
        clock = Clock()
        report = opened(ladder, tmp_path, clock, tripped=dict(tripped, last=clock.now) if tripped else None)
        record = only(records)
        clock.now += 60
        write_report(report, clock.now, dict(unreadable, last=clock.now))
        ladder.poll(clock.now, BOOT)
        assert record["state"] == cleared, record
        if cleared == repair.HELD:
            assert "row_remap_unreadable" in record["why"]


def test_undated_lines_after_the_step_hold_the_repair(setup, tmp_path):
    ladder, _node, _job, records, _saves = setup()
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    clock.now += 60
    write_report(report, clock.now, fault(last=clock.now - 120, undated=1))
    ladder.poll(clock.now, BOOT)
    assert only(records)["state"] == repair.HELD and "without a time" in only(records)["why"]


@pytest.mark.parametrize("content", [None, "{not json", '{"time": "yesterday", "faults": []}',
                                     '{"time": "2027-01-15T08:00:00+00:00", "faults": {}}'])
def test_a_report_that_cannot_be_read_opens_nothing_and_clears_nothing(setup, tmp_path, content):
    ladder, _node, _job, records, _saves = setup()
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    record = only(records)
    if content is None:
        report.unlink()
    else:
        report.write_text(content)
    clock.now += 60
    seen = ladder.poll(clock.now, BOOT)
    assert seen["report"] and record["state"] == repair.VERIFYING
    # Past the wait with still no report: held, and why.
    clock.now += 1800
    ladder.poll(clock.now, BOOT)
    assert record["state"] == repair.HELD and "within 1800 s" in record["why"] and len(records) == 1


def test_a_new_occurrence_after_a_cleared_repair_opens_a_new_one(setup, tmp_path):
    ladder, _node, _job, records, _saves = setup()
    clock = Clock()
    report = opened(ladder, tmp_path, clock)
    clock.now += 60
    write_report(report, clock.now, fault(last=clock.now - 120))
    ladder.poll(clock.now, BOOT)
    assert only(records)["state"] == repair.CLEARED
    clock.now += 600
    write_report(report, clock.now, fault(last=clock.now - 30))
    ladder.poll(clock.now, BOOT)
    assert sorted(r["state"] for r in records.values()) == [repair.CLEARED, repair.VERIFYING]


def test_a_repair_held_on_an_unknown_hides_and_blocks_no_other(setup, tmp_path):
    """Two faults tripped in one report: the GPU reset's nvidia-smi fails
    (held, no reset), and XID 13 on the other GPU goes its own way to
    cleared, each with its own record."""
    ladder, node, job, records, _saves = setup(node=Node(query=(9, "")))
    clock = Clock()
    report = tmp_path / "report.json"
    other = "00000000:86:00.0"
    write_report(report, clock.now, fault(code=62, cls="RESET_GPU", step="reset_gpu", last=clock.now - 60),
                 fault(pci=other, last=clock.now - 60))
    ladder.poll(clock.now, BOOT)
    by_fault = {r["fault"]: r for r in records.values()}
    assert by_fault[f"xid-62-{PCI}"]["state"] == repair.HELD and node.made("reset") == []
    assert by_fault[f"xid-13-{other}"]["state"] == repair.VERIFYING
    assert len(job.checkpoints) == 2
    clock.now += 60
    write_report(report, clock.now, fault(code=62, cls="RESET_GPU", step="reset_gpu", last=clock.now - 120),
                 fault(pci=other, last=clock.now - 120))
    ladder.poll(clock.now, BOOT)
    assert by_fault[f"xid-13-{other}"]["state"] == repair.CLEARED
    assert by_fault[f"xid-62-{PCI}"]["state"] == repair.HELD and node.made("reset") == []
