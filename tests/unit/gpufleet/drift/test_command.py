"""`gpufleet drift` end to end with the scan replaced by canned callback
output: exit codes, outputs, --fix with and without confirmation."""

from __future__ import annotations

import json

import pytest

from gpufleet import cli
from gpufleet.drift import _command, _runner

from .helpers import rec


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "galaxy.yml").write_text("namespace: gpufleet\n")
    (tmp_path / "inv").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fake_scans(monkeypatch, *scans, fix_events=(), fix_rc=0):
    """Each scan writes the next canned callback report; the fix sends
    `fix_events` (ansible-runner's) and returns `fix_rc`."""
    calls = {"scan": 0, "fix": []}

    def scan(root, inventory, report_path, limit=None, tags=None, quiet=False):
        records = scans[calls["scan"]]
        calls["scan"] += 1
        hosts = {r["host"]: {"provider": "lab", "region": "r", "gpu_model": "none", "groups": ["lab"],
                             "versions": {}} for r in records}
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps({"version": 1, "hosts": hosts, "records": records, "started": "s",
                                           "finished": "f"}))
        return 0, "successful"

    def fix(root, inventory, hosts, roles, quiet=False, on_event=None):
        calls["fix"].append((hosts, roles))
        for event in fix_events:
            on_event(event)
        return fix_rc, "successful" if fix_rc == 0 else "failed"

    monkeypatch.setattr(_runner, "scan", scan)
    monkeypatch.setattr(_runner, "fix", fix)
    return calls


DRIFTED = [rec("n1", "x", "in-sync"), rec("n2", "baseline : Configure chrony", "drifted")]
CLEAN = [rec("n1", "x", "in-sync"), rec("n2", "baseline : Configure chrony", "in-sync")]


def test_drift_exits_2_and_writes_every_format(project, monkeypatch, capsys):
    fake_scans(monkeypatch, DRIFTED)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet"]) == 2
    out = project / "out"
    assert json.loads((out / "report.json").read_text())["summary"]["exit_code"] == 2
    assert (out / "report.xml").read_text().startswith("<?xml")
    assert "Drifted: n2" in (out / "report.html").read_text()
    printed = capsys.readouterr().out
    assert "n2                   drifted" in printed
    assert (project / ".gpufleet" / "drift-history.jsonl").exists()
    # Both end with the command that repairs what drifted.
    assert printed.rstrip().splitlines()[-2] == "to repair what drifted: gpufleet drift -i inv --limit n2 --fix"
    assert ('<p id="next-step">To repair what drifted: <code>gpufleet drift -i inv --limit n2 --fix</code></p>'
            in (out / "report.html").read_text())


def test_fix_yes_converges_only_drifted_hosts_and_roles_then_rescans(project, monkeypatch):
    calls = fake_scans(monkeypatch, DRIFTED, CLEAN)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix", "--yes"]) == 0
    assert calls["fix"] == [(["n2"], ["baseline"])]
    assert calls["scan"] == 2


def test_fix_repairs_what_it_can_and_says_what_it_could_not_and_why(project, monkeypatch, capsys):
    # A blocker on n2 (security's check fails, before and after), drift in
    # two roles of n2 and one of n1; the converge fails in security on n2
    # (rescued by site.yml: the other roles still converge) and exits 2.
    before = [rec("n1", "baseline : Configure chrony", "drifted"),
              rec("n2", "security : Check sshd", "failed", role="gpufleet.cloud.security", message="passwords on"),
              rec("n2", "security : Load the firewall", "drifted", role="gpufleet.cloud.security"),
              rec("n2", "monitoring : Start node_exporter", "drifted", role="gpufleet.cloud.monitoring")]
    after = [rec("n1", "baseline : Configure chrony", "in-sync"),
             rec("n2", "security : Check sshd", "failed", role="gpufleet.cloud.security", message="passwords on"),
             rec("n2", "security : Load the firewall", "in-sync", role="gpufleet.cloud.security"),
             rec("n2", "monitoring : Start node_exporter", "in-sync", role="gpufleet.cloud.monitoring")]
    events = [
        {"event": "runner_on_failed", "event_data": {"host": "n2", "role": "security", "task": "Check sshd",
                                                     "res": {"msg": "sshd runs with passwords on"}}},
        # Ignored failures (a scan's, or a task's own ignore_errors) are not the converge failing.
        {"event": "runner_on_failed", "event_data": {"host": "n1", "role": "baseline", "task": "Probe",
                                                     "ignore_errors": True, "res": {"msg": "no"}}},
    ]
    calls = fake_scans(monkeypatch, before, after, fix_events=events, fix_rc=2)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix", "--yes"]) == 4
    assert calls["fix"] == [(["n1", "n2"], ["baseline", "monitoring", "security"])]
    out = capsys.readouterr().out
    assert "fix: repaired 3 of 4 drifted or failed resources" in out
    assert ("fix: not repaired: n2: security : Check sshd: the converge failed at 'Check sshd': "
            "sshd runs with passwords on") in out
    fix = json.loads((project / "out" / "after-fix" / "report.json").read_text())["fix"]
    assert fix["converge_rc"] == 2
    assert sorted(r["resource"] for r in fix["repaired"]) == [
        "baseline : Configure chrony", "monitoring : Start node_exporter", "security : Load the firewall"]
    assert fix["not_repaired"] == [{"host": "n2", "resource": "security : Check sshd", "state": "failed",
                                    "why": "the converge failed at 'Check sshd': sshd runs with passwords on"}]


def test_a_loop_item_no_longer_reported_is_repaired_unless_its_host_went_dark(project, monkeypatch):
    # A member removed from a group: its item is gone from the scan after.
    # On a host that scan could not read, gone means unknown, not repaired.
    member = "docker : Remove the members docker_users does not list [nobody]"
    before = [rec("n1", member, "drifted"), rec("n2", member, "drifted")]
    after = [rec("n1", "x", "in-sync"), rec("n2", "Gathering Facts", "unreachable", role=None, message="down")]
    fake_scans(monkeypatch, before, after)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix", "--yes"]) == 8
    fix = json.loads((project / "out" / "after-fix" / "report.json").read_text())["fix"]
    assert fix["repaired"] == [{"host": "n1", "resource": member}]
    assert fix["not_repaired"] == [{"host": "n2", "resource": member, "state": "not scanned again",
                                    "why": "not scanned again after the converge"}]


def test_a_fix_whose_converge_failed_never_exits_0(project, monkeypatch, capsys):
    # The scan after finds everything in sync, but the converge failed (a
    # task outside the drifted resources): the exit code says so.
    fake_scans(monkeypatch, DRIFTED, CLEAN, fix_rc=2)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix", "--yes"]) == 4
    assert "fix: repaired 1 of 1 drifted or failed resources" in capsys.readouterr().out


def test_fix_asks_and_does_nothing_when_refused(project, monkeypatch):
    calls = fake_scans(monkeypatch, DRIFTED)
    monkeypatch.setattr(_command, "_can_ask", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix"]) == 2
    assert calls["fix"] == []


def test_a_waiver_file_clears_the_exit_code(project, monkeypatch):
    fake_scans(monkeypatch, DRIFTED)
    (project / "w.yml").write_text(
        "waivers:\n  - {host: n2, resource: '*chrony*', reason: known, expires: 2999-01-01}\n")
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--waivers", "w.yml"]) == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["drift", "-i", "missing"], "--inventory missing: no such file or directory"),
    (["drift", "-i", "inv", "--waivers", "nope.yml"], "--waivers nope.yml: no such file"),
])
def test_bad_arguments_name_the_option(project, monkeypatch, capsys, argv, message):
    fake_scans(monkeypatch, DRIFTED)
    assert cli.main(argv) == 1
    assert message in capsys.readouterr().err


def test_fix_without_yes_and_without_a_terminal_exits_1_before_scanning(project, monkeypatch, capsys):
    calls = fake_scans(monkeypatch, DRIFTED)

    def no_prompt(prompt):
        raise AssertionError("input() must not be reached: it raises EOFError with no terminal")

    monkeypatch.setattr("builtins.input", no_prompt)
    monkeypatch.setattr("sys.stdin", open("/dev/null"))
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix"]) == 1
    assert "add --yes" in capsys.readouterr().err
    assert calls == {"scan": 0, "fix": []}


def test_format_json_prints_only_the_summary_and_the_report_paths(project, monkeypatch, capsys):
    fake_scans(monkeypatch, DRIFTED)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--format", "json"]) == 2
    printed = json.loads(capsys.readouterr().out)
    assert printed["summary"]["exit_code"] == 2
    assert printed["summary"]["states"] == {"in-sync": 1, "drifted": 1}
    assert printed["reports"]["json"] == str(project / "out" / "report.json")


def test_format_json_with_fix_keeps_stdout_one_object(project, monkeypatch, capsys):
    calls = fake_scans(monkeypatch, DRIFTED, CLEAN)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--format", "json", "--fix", "--yes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # One object per scan: before the fix, and the scan after it.
    assert [json.loads(line)["summary"]["exit_code"] for line in lines] == [2, 0]
    assert calls["fix"] == [(["n2"], ["baseline"])]


def test_help_lists_the_exit_codes_and_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["drift", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    for line in ("0   every resource", "1   the command could not run", "2   drift", "4   failed", "8   unreachable",
                 "gpufleet drift -i inventories/aliyun --fix --yes"):
        assert line in text


def test_an_unknown_format_names_the_option(project, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["drift", "-i", "inv", "--format", "yaml"])
    assert exited.value.code == 1
    assert "--format" in capsys.readouterr().err
