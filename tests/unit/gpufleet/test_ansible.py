"""gpufleet._ansible: the progress every playbook run prints, and the
events a command reads."""

import io

from gpufleet import _ansible


class Result:
    rc, status = 0, "successful"


def test_progress_names_each_failed_task_with_its_host_and_reason():
    stream = io.StringIO()
    handler = _ansible.progress(stream)
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
    handler = _ansible.progress(stream, quiet=True)
    handler({"event": "playbook_on_task_start", "event_data": {"task": "Write daemon.json"}})
    handler({"event": "runner_on_unreachable", "event_data": {"host": "n2"}})
    handler({"event": "runner_on_failed", "event_data": {"host": "n1", "task": "Write daemon.json", "res": {"msg": "boom"}}})
    assert stream.getvalue().splitlines() == ["        failed: n1: Write daemon.json: boom"]


def test_a_command_sees_every_event_and_the_progress_still_shows(monkeypatch, tmp_path, capsys):
    events = [{"event": "playbook_on_task_start", "event_data": {"task": "Read the guard's metrics"}},
              {"event": "runner_on_ok", "event_data": {"host": "n1", "res": {"content": "eA=="}}}]

    def run(**kwargs):
        for event in events:
            assert kwargs["event_handler"](event) is True
        return Result()

    monkeypatch.setattr(_ansible.ansible_runner, "run", run)
    seen = []
    assert _ansible.run_playbook(tmp_path, "playbooks/guard_status.yml", "inv", {}, "", None, None, False,
                                 on_event=seen.append) == (0, "successful")
    assert seen == events
    assert "  [  1] Read the guard's metrics" in capsys.readouterr().err
