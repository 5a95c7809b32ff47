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


def fake_scans(monkeypatch, *scans):
    """Each scan writes the next canned callback report."""
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

    def fix(root, inventory, hosts, roles, quiet=False):
        calls["fix"].append((hosts, roles))
        return 0, "successful"

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
    assert "n2                   drifted" in capsys.readouterr().out
    assert (project / ".gpufleet" / "drift-history.jsonl").exists()


def test_fix_yes_converges_only_drifted_hosts_and_roles_then_rescans(project, monkeypatch):
    calls = fake_scans(monkeypatch, DRIFTED, CLEAN)
    assert cli.main(["drift", "-i", "inv", "--output-dir", "out", "--quiet", "--fix", "--yes"]) == 0
    assert calls["fix"] == [(["n2"], ["baseline"])]
    assert calls["scan"] == 2


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
