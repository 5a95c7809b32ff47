"""make test's closing table: every stage listed, failures and stages that
never started included, and the exit code says whether all passed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "stage_table.py"
spec = importlib.util.spec_from_file_location("stage_table", SCRIPT)
stage_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_table)


def run(tmp_path, log_text, *stages):
    log = tmp_path / "times.log"
    log.write_text(log_text)
    return subprocess.run([sys.executable, str(SCRIPT), str(log), *stages], capture_output=True, text=True, check=False)


def rows(stdout):
    return {line.split()[0]: line for line in stdout.splitlines() if line and not line.startswith("-")}


def test_all_passed_gives_zero_and_a_total(tmp_path):
    out = run(tmp_path, "unit 61s rc=0\nlint 22s rc=0\n", "unit", "lint")
    assert out.returncode == 0, out.stdout
    table = rows(out.stdout)
    assert table["unit"].split() == ["unit", "passed", "61"]
    assert table["total"].split() == ["total", "passed", "83"]


def test_a_failed_stage_fails_the_table_and_the_later_stages_still_show(tmp_path):
    out = run(tmp_path, "unit 61s rc=2\nlint 22s rc=0\nsanity 40s rc=0\n", "unit", "lint", "sanity")
    assert out.returncode == 1
    table = rows(out.stdout)
    assert "failed (exit 2)" in table["unit"]
    assert table["lint"].split()[1] == "passed" and table["sanity"].split()[1] == "passed"
    assert table["total"].split()[1] == "failed"


def test_a_stage_that_never_reported_is_a_failure_not_a_gap(tmp_path):
    out = run(tmp_path, "unit 61s rc=0\n", "unit", "molecule")
    assert out.returncode == 1
    assert "failed (did not start)" in rows(out.stdout)["molecule"]


def test_a_missing_log_fails_every_stage(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.log"), "unit"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 1 and "did not start" in out.stdout


def test_the_last_run_of_a_stage_counts_and_noise_is_ignored(tmp_path):
    log = tmp_path / "times.log"
    log.write_text("unit 10s rc=1\nrandom words\nunit 12s rc=0\n")
    assert stage_table.read(log) == {"unit": (12, 0)}


def test_without_stages_it_says_how_to_call_it(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "Usage" in out.stderr


def test_a_group_reports_each_stage_and_its_own_wall_time_which_is_what_the_total_adds(tmp_path):
    log = "unit 61s rc=0\nlint 22s rc=0\nunit+lint 63s rc=0\nmolecule 100s rc=0\n"
    out = run(tmp_path, log, "unit+lint", "molecule")
    assert out.returncode == 0, out.stdout
    table = rows(out.stdout)
    assert table["unit"].split() == ["unit", "passed", "61"]
    assert table["lint"].split() == ["lint", "passed", "22"]
    assert table["unit+lint"].split() == ["unit+lint", "passed", "(side", "by", "side)", "63"]
    # 63 + 100: the overlapping stages' 61 + 22 are not added.
    assert table["total"].split() == ["total", "passed", "163"]


def test_a_failed_stage_fails_its_group(tmp_path):
    out = run(tmp_path, "unit 61s rc=0\nlint 22s rc=1\nunit+lint 63s rc=0\n", "unit+lint")
    assert out.returncode == 1
    table = rows(out.stdout)
    assert table["unit+lint"].split()[1] == "failed" and "failed (exit 1)" in table["lint"]


def test_a_group_whose_stage_never_started_is_failed(tmp_path):
    out = run(tmp_path, "unit 61s rc=0\n", "unit+lint")
    assert out.returncode == 1
    table = rows(out.stdout)
    assert "did not start" in table["lint"] and table["unit+lint"].split()[1] == "failed"
    assert table["unit+lint"].split()[-1] == "-"
