"""tools/test_times.py: docs/test-times.md from one `make test` run: the
stages' table, each Molecule scenario, and each test module's seconds
summed from its stage's JUnit report, the slowest first."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("test_times", ROOT / "tools" / "test_times.py")
test_times = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(test_times)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.integration.test_drift" name="test_clean" time="100.5"/>
<testcase classname="tests.integration.test_drift" name="test_matrix[a]" time="300.0"><failure message="x"/></testcase>
<testcase classname="tests.integration.roles.nccl.test_nvidia_repo.TestMove" name="test_move" time="40"/>
<testcase classname="tests.integration.roles.nccl.test_nvidia_repo" name="test_skip" time="0.1"><skipped/></testcase>
</testsuite></testsuites>
"""


def write_inputs(tmp_path):
    (tmp_path / "times.log").write_text("unit 60s rc=0\nmolecule 700s rc=0\nlab-roles 900s rc=1\n"
                                        "lab-fleet 800s rc=0\nlab-fleet+lab-roles 910s rc=0\n")
    (tmp_path / "junit").mkdir()
    (tmp_path / "junit" / "lab-roles.xml").write_text(JUNIT)
    (tmp_path / "molecule.log").write_text("docker 200s rc=0\nnccl 90s rc=1\n")
    out = tmp_path / "test-times.md"
    rc = test_times.main(["--times", str(tmp_path / "times.log"), "--junit-dir", str(tmp_path / "junit"),
                          "--molecule-times", str(tmp_path / "molecule.log"), "--out", str(out),
                          "unit", "molecule", "lab-fleet+lab-roles"])
    assert rc == 0
    return out.read_text()


def test_a_module_sums_its_tests_and_names_its_slowest(tmp_path):
    doc = write_inputs(tmp_path)
    assert "| `tests/integration/test_drift.py` | 2, 1 failed | 400 | `test_matrix[a]` (300) |" in doc
    # A test class belongs to its module.
    assert "| `tests/integration/roles/nccl/test_nvidia_repo.py` | 2, 1 skipped | 40 | `test_move` (40) |" in doc
    assert doc.index("test_drift.py") < doc.index("nccl/test_nvidia_repo.py"), "slowest module first"
    assert "## lab-roles (900 s)" in doc


def test_stages_scenarios_and_allowances_are_listed(tmp_path):
    doc = write_inputs(tmp_path)
    # The total adds the groups' wall times: 60 + 700 + 910.
    assert any(line.startswith("total") and line.split()[-1] == "1670" for line in doc.splitlines()), doc
    assert "| docker | 200 | passed |" in doc and "| nccl | 90 | failed (exit 1) |" in doc
    for work, seconds in test_times.ALLOWANCES:
        assert f"| {work} | {seconds} |" in doc


def test_missing_reports_leave_their_sections_out(tmp_path):
    out = tmp_path / "test-times.md"
    rc = test_times.main(["--times", str(tmp_path / "none.log"), "--junit-dir", str(tmp_path / "none"),
                          "--molecule-times", str(tmp_path / "none.log"), "--out", str(out), "unit"])
    assert rc == 0
    doc = out.read_text()
    assert "failed (did not start)" in doc and "## Molecule scenarios" not in doc
