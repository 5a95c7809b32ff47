"""What a node converged by gpufleet.cloud.guard really does: the daemon
runs as a service, reads the node's AWS metadata service (the emulator of
prepare.yml), writes its metrics, and on a spot notice gives the stand-in
job its signal and its checkpoint, once, even across a restart; a tripped
GPU fault of a class with repair on is checkpointed, its job stopped, and
cleared by a later node_health report."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import assert_file, assert_unit_running, project_dir

from tests.support.waiting import wait_for

LIBEXEC = "/usr/local/lib/gpufleet/guard"
METRICS = "/var/lib/prometheus/node-exporter/gpufleet_guard.prom"
MARKER = "/run/gpufleet-guard/event.json"
STATE = "/var/lib/gpufleet/guard/state.json"


def metric_lines(host):
    return host.file(METRICS).content_string.splitlines() if host.file(METRICS).exists else []


def fleet_view(host) -> dict:
    """`gpufleet guard status` of this node, as a user runs it against the
    scenario's inventory: the node's entry of its JSON."""
    inventory = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory"
    gpufleet = Path(sys.executable).with_name("gpufleet")
    env = dict(os.environ, ANSIBLE_CONFIG=str(project_dir() / "ansible.cfg"))
    done = subprocess.run([str(gpufleet), "guard", "status", "-i", str(inventory), "--limit", host.backend.name,
                           "--format", "json", "--quiet"], cwd=project_dir(), env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (node,) = json.loads(done.stdout)["nodes"]
    return node


def test_the_daemon_and_its_configuration(host):
    for name in ("gpufleet_guard.py", "gpufleet_guard_actions.py", "gpufleet_guard_maintenance.py",
                 "gpufleet_guard_notice.py", "gpufleet_guard_probes.py", "gpufleet_guard_triggers.py",
                 "gpufleet_guard_repair.py", "gpufleet_guard_breaker.py"):
        assert_file(host, f"{LIBEXEC}/{name}")
    # The node-side library, one copy for every role's scripts, on the
    # daemon's PYTHONPATH.
    for name in ("gpufleet_textfile.py", "gpufleet_clouds.py", "gpufleet_nvidia_smi.py"):
        assert_file(host, f"/usr/local/lib/gpufleet/{name}")
    assert_file(host, "/etc/systemd/system/gpufleet-guard.service",
                contains=("Environment=PYTHONPATH=/usr/local/lib/gpufleet",))
    config = json.loads(assert_file(host, "/etc/gpufleet/guard/config.json"))
    assert config["cloud"] == "aws" and config["spot"] is True and config["poll_seconds"] == 1
    assert config["idle"]["window_seconds"] == 3600 and config["idle"]["units"] == ["gft-train.service"]
    assert config["budget"] == {"price_per_hour": 3.6, "node_cap": 100000.0, "job_cap": None, "alarm_ratio": 0.8,
                                "job_unit": ""}
    assert config["actions"]["final_action"] == "none" and config["actions"]["signal"] == "SIGTERM"
    # AWS's maintenance is in the instance metadata: no API call to make.
    assert config["maintenance"] == {"enabled": True, "lead_seconds": 1800, "command": [], "not_read": "",
                                     "interval_seconds": 300, "timeout_seconds": 120}
    # Repair on for one class, with the user's breaker and no reboot call
    # (no instance id in this scenario): no SDK, no access key on the node.
    assert config["repair"]["classes"] == ["RESTART_APP"] and config["repair"]["reboot_command"] == []
    assert config["repair"]["breaker_command"] == ["/usr/local/bin/gft-breaker"]
    assert not host.file("/etc/gpufleet/guard/breaker.json").exists
    assert not host.file("/opt/gpufleet/guard-sdk").exists
    assert host.file("/var/lib/gpufleet/guard").mode == 0o700
    assert_unit_running(host, "gpufleet-guard")
    unit = host.file("/etc/systemd/system/gpufleet-guard.service").content_string
    assert "NoNewPrivileges=yes" in unit and "RuntimeDirectoryPreserve=yes" in unit


def test_the_metrics_say_what_the_guard_read(host):
    wait_for(lambda: any(line.startswith("gpufleet_guard_last_poll") for line in metric_lines(host)),
             "the guard wrote its metrics")
    lines = metric_lines(host)
    assert 'gpufleet_guard_spot_state{cloud="aws",state="clear"} 1' in lines
    # Nothing scheduled: the emulator's 404, read as clear.
    assert 'gpufleet_guard_maintenance_state{cloud="aws",state="clear"} 1' in lines
    # No nvidia-smi in a container: utilisation is unknown, so idle time never runs.
    assert "gpufleet_guard_idle_seconds 0.0" in lines
    spend = next(line for line in lines if line.startswith('gpufleet_guard_spend{scope="node"}'))
    assert float(spend.split()[-1]) > 0
    assert 'gpufleet_guard_budget_state{state="ok"} 1' in lines


def test_a_spot_notice_signals_the_job_checkpoints_once_and_survives_a_restart(host):
    deadline = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(minutes=2)
    notice = json.dumps({"action": "terminate", "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")})
    # Stopped before the records go: a stop is itself a SIGTERM to the job.
    host.run_test("systemctl stop gft-train.service")
    host.run_test("rm -f /var/lib/gft-train/signals /var/lib/gft-train/checkpoints")
    host.run_test("systemctl start gft-train.service")
    try:
        host.run_test("printf '%%s' %s > /run/gft-notice", notice)
        marker = json.loads(wait_for(lambda: host.file(MARKER).exists and host.file(MARKER).content_string,
                                     "the marker file appeared"))
        assert marker["reason"] == "spot" and marker["deadline_utc"] == deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert wait_for(lambda: host.file("/var/lib/gft-train/signals").exists,
                        "the job got its signal")
        assert host.file("/var/lib/gft-train/signals").content_string == "SIGTERM\n"
        wait_for(lambda: host.file("/var/lib/gft-train/checkpoints").exists, "the checkpoint hook ran")
        wait_for(lambda: 'gpufleet_guard_checkpoint_landed{reason="spot"} 1' in metric_lines(host),
                 "the metrics say the checkpoint landed")
        state = json.loads(host.file(STATE).content_string)
        (record,) = [r for r in state["events"].values() if r["reason"] == "spot"]
        assert record["hook"]["landed"] is True and record["final"]["action"] == "none"

        # The same notice after a restart of both: no second signal, no second checkpoint.
        host.run_test("systemctl stop gft-train.service")
        host.run_test("rm /var/lib/gft-train/signals")
        host.run_test("systemctl start gft-train.service")
        host.run_test("systemctl restart gpufleet-guard.service")
        polled = metric_lines(host)
        wait_for(lambda: metric_lines(host) != polled, "the restarted guard polled", 30)
        time.sleep(3)  # three more polls at guard_poll_seconds 1
        assert not host.file("/var/lib/gft-train/signals").exists
        assert len(host.file("/var/lib/gft-train/checkpoints").content_string.split()) == 1
    finally:
        host.run("rm -f /run/gft-notice")


def test_gpufleet_guard_status_shows_the_node_from_outside(host):
    # The fleet view, as a user runs it against this scenario's inventory:
    # after the notice above, the last event and its checkpoint.
    node = fleet_view(host)
    assert (node["host"], node["state"], node["cloud"]) == (host.backend.name, "reporting", "aws")
    assert node["last_event"] == "spot" and node["checkpoint_landed"] is True
    assert node["spend"] > 0 and node["spend_cap"] == 100000.0 and node["budget"] == "ok"


def test_a_scheduled_maintenance_window_checkpoints_the_job_and_leaves_the_reboot_to_the_cloud(host):
    """A system reboot scheduled 20 minutes ahead, inside the default
    30-minute lead: the job gets its signal and its checkpoint once, and
    the guard's final action is none; the fleet view shows the window."""
    start = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(minutes=20)
    events = json.dumps([{"NotBefore": start.strftime("%d %b %Y %H:%M:%S GMT"), "Code": "system-reboot",
                          "Description": "scheduled reboot", "EventId": "instance-event-0gft",
                          "NotAfter": (start + datetime.timedelta(minutes=15)).strftime("%d %b %Y %H:%M:%S GMT"),
                          "State": "active"}])
    host.run_test("systemctl stop gft-train.service")
    host.run_test("rm -f /var/lib/gft-train/signals /var/lib/gft-train/checkpoints")
    host.run_test("systemctl start gft-train.service")
    try:
        host.run_test("printf '%%s' %s > /run/gft-maintenance", events)
        wait_for(lambda: host.file(MARKER).exists and '"maintenance"' in host.file(MARKER).content_string,
                 "the maintenance event's marker")
        marker = json.loads(host.file(MARKER).content_string)
        assert marker["deadline_utc"] == start.strftime("%Y-%m-%dT%H:%M:%SZ")
        wait_for(lambda: host.file("/var/lib/gft-train/checkpoints").exists, "the checkpoint hook ran")
        assert host.file("/var/lib/gft-train/signals").content_string == "SIGTERM\n"
        wait_for(lambda: 'gpufleet_guard_checkpoint_landed{reason="maintenance"} 1' in metric_lines(host),
                 "the metrics say the checkpoint landed")
        (record,) = [r for r in json.loads(host.file(STATE).content_string)["events"].values()
                     if r["reason"] == "maintenance"]
        assert record["final"]["action"] == "none" and record["hook"]["landed"] is True
        assert 'gpufleet_guard_maintenance_state{cloud="aws",state="scheduled"} 1' in metric_lines(host)
        node = fleet_view(host)
        assert (node["maintenance"], node["maintenance_code"]) == ("scheduled", "system-reboot"), node
        assert node["maintenance_start"] == start.timestamp()
    finally:
        host.run("rm -f /run/gft-maintenance")


HEALTH_REPORT = "/run/gft-health/report.json"


def write_health_report(host, at: float, *faults) -> None:
    """node_health's report as its script writes it (the scenario has no
    GPU to fault and no node_health): its time and classified faults."""
    report = json.dumps({"time": datetime.datetime.fromtimestamp(int(at), datetime.timezone.utc).isoformat(),
                         "status": "fail", "faults": list(faults)})
    host.run_test("mkdir -p /run/gft-health && printf '%%s' %s > %s.tmp && mv %s.tmp %s",
                  report, HEALTH_REPORT, HEALTH_REPORT, HEALTH_REPORT)


def repair_record(host) -> dict | None:
    repairs = json.loads(host.file(STATE).content_string).get("repairs", {}) if host.file(STATE).exists else {}
    return next(iter(repairs.values()), None)


def test_a_tripped_gpu_fault_is_checkpointed_its_job_stopped_and_cleared_by_a_later_report(host):
    """XID 13 three times within the hour (RESTART_APP's threshold): the
    guard asks the breaker, checkpoints the job and stops it; a report
    written after that, with only the old lines in its window, clears the
    repair and gives the breaker's place back."""
    host.run_test("systemctl stop gft-train.service")
    host.run_test("rm -f /var/lib/gft-train/signals /var/lib/gft-train/checkpoints /var/lib/gft-train/breaker")
    host.run_test("systemctl start gft-train.service")
    xid = {"kind": "xid", "code": 13, "pci": "00000000:3B:00.0", "class": "RESTART_APP", "step": "restart_app",
           "count": 3, "undated": 0, "tripped": True, "detail": "Graphics Engine Exception"}
    now = float(host.check_output("date +%s"))
    write_health_report(host, now, dict(xid, last=now - 30))
    record = wait_for(lambda: (r := repair_record(host)) and r["state"] == "verifying" and r, "the repair's first rung")
    assert [step["step"] for step in record["steps"]] == ["breaker", "checkpoint", "restart_app"]
    assert host.file("/var/lib/gft-train/breaker").content_string == f"acquire {record['id']}\n"
    assert host.file("/var/lib/gft-train/signals").content_string == "SIGTERM\n"
    assert host.file("/var/lib/gft-train/checkpoints").exists
    assert not host.service("gft-train.service").is_running
    # No node_health here to start: said, and its timer would run it.
    assert "gpufleet-health.service failed" in record["why"]
    wait_for(lambda: 'gpufleet_guard_repair_state{fault="xid-13-00000000:3B:00.0",class="RESTART_APP",'
                     'rung="restart_app",state="verifying"} 1' in metric_lines(host), "the repair's metric")

    # A later report: the same old lines, nothing new since the rung.
    time.sleep(1)
    write_health_report(host, float(host.check_output("date +%s")), dict(xid, last=now - 30))
    wait_for(lambda: repair_record(host)["state"] == "cleared", "the repair cleared")
    assert host.file("/var/lib/gft-train/breaker").content_string.splitlines() == [
        f"acquire {record['id']}", f"release {record['id']}"]
    node = fleet_view(host)
    assert node["repairs"] == [["xid-13-00000000:3B:00.0", "RESTART_APP", "restart_app", "cleared"]], node
    # The guard's own account, which the fleet view reads from the node.
    (history,) = node["repair_history"]
    assert history["state"] == "cleared" and history["why"].startswith("cleared after restart_app")
    assert [step["step"] for step in history["steps"]] == ["breaker", "checkpoint", "restart_app", "breaker_release"]
    assert host.file("/run/gpufleet-guard/repairs.json").mode == 0o644
    # Still tripped in the report, but counted once: no second repair.
    time.sleep(2)
    assert len(json.loads(host.file(STATE).content_string)["repairs"]) == 1
