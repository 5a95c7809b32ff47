"""gpufleet.cloud.service_config's decisions, with systemd faked and the
process's start time and command line given; how it reads a real process
from /proc is tested on this test's own process. What a real daemon does
is proven on real nodes (the Molecule scenarios and the lab's drift test)."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import service_config

ARGV = ("/usr/bin/prometheus-node-exporter", "--web.listen-address=127.0.0.1:9100")


class FakeSystemd:
    """One unit: loaded and active with a main process whose start time and
    command line are given; a restart starts a new process with the argv
    `restart_argv` (what a unit drop-in would impose), now."""

    def __init__(self, monkeypatch, *, started, argv=ARGV, load="loaded", active="active", restart_argv=None,
                 reload_pending=False):
        self.pid, self.load, self.active, self.reload_pending = 4242, load, active, reload_pending
        self.procs = {4242: (started, list(argv))}
        self.restarts = self.daemon_reloads = 0

        def run_command(_module, cmd, *args, **kwargs):
            if cmd[1] == "show":
                return 0, "LoadState=%s\nActiveState=%s\nMainPID=%d\nNeedDaemonReload=%s\n" % (
                    self.load, self.active, self.pid, "yes" if self.reload_pending else "no"), ""
            if cmd[1] == "daemon-reload":
                self.reload_pending = False
                self.daemon_reloads += 1
                return 0, "", ""
            if cmd[1] == "restart":
                self.restarts += 1
                self.pid += 1
                self.procs[self.pid] = (time.time(), list(restart_argv or argv))
                return 0, "", ""
            raise AssertionError(cmd)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda _m, name, *a, **k: "/usr/bin/" + name)
        monkeypatch.setattr(service_config, "_process", self.procs.get)


def run(capsys, files, check=False, argv=None):
    args = {"name": "prometheus-node-exporter", "files": [str(f) for f in files], "_ansible_check_mode": check,
            "_ansible_diff": True}
    if argv is not None:
        args["argv"] = argv
    with patch_module_args(args), pytest.raises(SystemExit):
        service_config.main()
    return json.loads(capsys.readouterr().out)


def written(tmp_path, name="defaults", age=100.0):
    path = tmp_path / name
    path.write_text("ARGS=...\n")
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_a_process_started_after_its_files_changed_is_in_sync(monkeypatch, capsys, tmp_path):
    unit = FakeSystemd(monkeypatch, started=time.time() - 10)
    result = run(capsys, [written(tmp_path)], argv=list(ARGV))
    assert result["changed"] is False and result["restarted"] is False and unit.restarts == 0
    assert result["changed_files"] == []


@pytest.mark.parametrize("check", [True, False], ids=["check mode", "run"])
def test_a_file_changed_after_the_start_is_drift_and_a_run_restarts(monkeypatch, capsys, tmp_path, check):
    unit = FakeSystemd(monkeypatch, started=time.time() - 200)
    path = written(tmp_path)
    result = run(capsys, [path], check=check)
    assert result["changed"] is True
    assert result["changed_files"] == [str(path)]
    assert "runs the configuration from before" in result["msg"] and str(path) in result["msg"]
    assert "pid 4242 started" in result["diff"]["before"]
    assert unit.restarts == (0 if check else 1) and result["restarted"] is (not check)


def test_a_drop_in_added_to_a_listed_directory_counts(monkeypatch, capsys, tmp_path):
    dropins = tmp_path / "unit.d"
    dropins.mkdir()
    stamp = time.time() - 100
    os.utime(dropins, (stamp, stamp))
    FakeSystemd(monkeypatch, started=time.time() - 50)
    (dropins / "override.conf").write_text("[Service]\n")
    os.utime(dropins, (stamp, stamp))  # only the new entry is newer than the start
    result = run(capsys, [dropins], check=True)
    assert result["changed"] is True and result["changed_files"] == [str(dropins / "override.conf")]


def test_other_flags_are_drift_and_a_restart_that_keeps_them_fails(monkeypatch, capsys, tmp_path):
    by_hand = list(ARGV) + ["--collector.disable-defaults"]
    FakeSystemd(monkeypatch, started=time.time() - 10, argv=by_hand)
    result = run(capsys, [written(tmp_path)], check=True, argv=list(ARGV))
    assert result["changed"] is True and "--collector.disable-defaults" in result["msg"]

    unit = FakeSystemd(monkeypatch, started=time.time() - 10, argv=by_hand, restart_argv=by_hand)
    result = run(capsys, [written(tmp_path)], argv=list(ARGV))
    assert result["failed"] is True and unit.restarts == 1
    assert "after a restart" in result["msg"] and "prometheus-node-exporter.service.d" in result["msg"]


def test_a_restart_brings_the_flags_back(monkeypatch, capsys, tmp_path):
    unit = FakeSystemd(monkeypatch, started=time.time() - 10, argv=list(ARGV) + ["--debug"], restart_argv=ARGV)
    result = run(capsys, [written(tmp_path)], argv=list(ARGV))
    assert result["changed"] is True and result["restarted"] is True and unit.restarts == 1


def test_unit_files_systemd_has_not_loaded_are_drift_and_a_run_reloads_first(monkeypatch, capsys, tmp_path):
    unit = FakeSystemd(monkeypatch, started=time.time() - 10, reload_pending=True)
    result = run(capsys, [written(tmp_path)], check=True)
    assert result["changed"] is True and "NeedDaemonReload=yes" in result["msg"] and unit.daemon_reloads == 0
    result = run(capsys, [written(tmp_path)])
    assert result["restarted"] is True and unit.daemon_reloads == 1 and unit.restarts == 1


@pytest.mark.parametrize("load, active", [("not-found", "inactive"), ("loaded", "failed")])
def test_nothing_running_runs_no_old_configuration_and_is_an_error_in_a_run(monkeypatch, capsys, tmp_path, load,
                                                                            active):
    # In check mode this is known, not unknown: no process runs any
    # configuration; the task that starts the unit reports it as drift.
    FakeSystemd(monkeypatch, started=time.time(), load=load, active=active)
    result = run(capsys, [written(tmp_path)], check=True)
    assert result["changed"] is False and "no process runs any configuration" in result["msg"]
    result = run(capsys, [written(tmp_path)])
    assert result["failed"] is True and "start it before comparing" in result["msg"]


def test_no_listed_file_exists(monkeypatch, capsys, tmp_path):
    FakeSystemd(monkeypatch, started=time.time())
    result = run(capsys, [tmp_path / "absent"], check=True)
    assert result["skipped"] is True and "check mode" in result["msg"]
    result = run(capsys, [tmp_path / "absent"])
    assert result["failed"] is True and result["msg"].startswith("files: none of")


def test_a_real_process_is_read_from_proc():
    started, argv = service_config._process(os.getpid())
    assert time.time() - 3600 < started <= time.time() + 0.05
    assert argv[0] == sys.executable or os.path.basename(argv[0]).startswith("python")
    assert service_config._process(2 ** 22 + 12345) is None


@pytest.mark.parametrize("after_start, drifted", [(1.0, True), (0.01, False)], ids=["a second later", "within 10 ms"])
def test_a_change_counts_only_beyond_the_clocks_resolution(monkeypatch, capsys, tmp_path, after_start, drifted):
    # The start time is read in clock ticks (10 ms): a file written within
    # that of the start is not taken for a later change; a second is.
    started = time.time() - 100
    FakeSystemd(monkeypatch, started=started)
    path = written(tmp_path, age=100 - after_start)
    assert run(capsys, [path], check=True)["changed"] is drifted
