"""The runner's environment for ansible-playbook: which ansible.cfg."""

import io
from pathlib import Path

from gpufleet.drift import _runner


class Result:
    rc, status = 0, "successful"


def captured_env(monkeypatch):
    seen = {}

    def run(**kwargs):
        seen.update(kwargs)
        return Result()

    monkeypatch.setattr(_runner.ansible_runner, "run", run)
    return seen


def test_uses_the_projects_config_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    seen = captured_env(monkeypatch)
    _runner.scan(tmp_path, "inventories/lab", tmp_path / "report.json", quiet=True)
    assert seen["envvars"]["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert seen["envvars"]["ANSIBLE_CALLBACKS_ENABLED"] == "gpufleet.cloud.drift"
    assert seen["cmdline"] == "--check --diff"


def test_honours_a_config_the_caller_chose(monkeypatch, tmp_path):
    chosen = tmp_path / "other.cfg"
    monkeypatch.setenv("ANSIBLE_CONFIG", str(chosen))
    seen = captured_env(monkeypatch)
    _runner.fix(tmp_path, "inventories/lab", ["a", "b"], ["baseline"], quiet=True)
    assert seen["envvars"]["ANSIBLE_CONFIG"] == str(chosen)
    assert seen["limit"] == "a,b" and seen["tags"] == "baseline"
    assert Path(seen["playbook"]) == tmp_path / "site.yml"


def test_progress_names_each_failed_task_with_its_host_and_reason():
    stream = io.StringIO()
    handler = _runner._progress(stream)
    handler({"event": "playbook_on_task_start", "event_data": {"task": "Enable and start the timers"}})
    handler({"event": "runner_item_on_failed",
             "event_data": {"host": "lab-node-1", "task": "Enable and start the timers",
                            "res": {"msg": "Unable to start service gpufleet-backup-prune.timer"}}})
    # An ignored failure is not one: the run goes on and rc says nothing of it.
    handler({"event": "runner_on_failed",
             "event_data": {"host": "lab-node-2", "task": "Probe", "ignore_errors": True, "res": {"msg": "x"}}})
    lines = stream.getvalue().splitlines()
    assert lines == ["  [  1] Enable and start the timers",
                     "        failed: lab-node-1: Enable and start the timers: "
                     "Unable to start service gpufleet-backup-prune.timer"]


def test_quiet_progress_still_names_a_failed_task():
    stream = io.StringIO()
    handler = _runner._progress(stream, quiet=True)
    handler({"event": "playbook_on_task_start", "event_data": {"task": "Write daemon.json"}})
    handler({"event": "runner_on_unreachable", "event_data": {"host": "n2"}})
    handler({"event": "runner_on_failed", "event_data": {"host": "n1", "task": "Write daemon.json", "res": {"msg": "boom"}}})
    assert stream.getvalue().splitlines() == ["        failed: n1: Write daemon.json: boom"]
