"""make test's stage loop (the `stages` target): every stage runs even
after one fails, the table lists each, and the exit code is non-zero if any
failed. Fake stages, defined in a second makefile with the real `timed`
helper, stand in for the real ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

FAKE = """
.PHONY: fake-pass fake-fail fake-late
fake-pass:
\t@$(call timed,fake-pass,true)
fake-fail:
\t@$(call timed,fake-fail,false)
fake-late:
\t@$(call timed,fake-late,touch $(MARK))
fake-broken-prerequisite: no-such-target
# Side by side or never: each waits (with a deadline) for the other's mark.
fake-ping:
\t@$(call timed,fake-ping,touch $(MARK).ping && timeout 60 sh -c 'until [ -e $(MARK).pong ]; do sleep 0.1; done')
fake-pong:
\t@$(call timed,fake-pong,touch $(MARK).pong && timeout 60 sh -c 'until [ -e $(MARK).ping ]; do sleep 0.1; done')
"""


def stages(tmp_path, names):
    extra = tmp_path / "fake.mk"
    extra.write_text(FAKE)
    return subprocess.run(
        ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-f", str(extra), "stages",
         f"STAGES={names}", f"TIMES={tmp_path / 'times.log'}", f"MARK={tmp_path / 'late-ran'}",
         f"JUNIT={tmp_path / 'junit'}", f"MOLECULE_TIMES={tmp_path / 'molecule-times.log'}",
         f"TEST_TIMES_DOC={tmp_path / 'test-times.md'}"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )


def row(stdout, stage):
    """The stage's row of the closing table (the stage lines before it are
    the `timed` helper's own)."""
    table = stdout.split("== make test: stages ==", 1)[1]
    return next(line for line in table.splitlines() if line.startswith(stage + " "))


def test_a_failed_stage_does_not_stop_the_later_ones_and_fails_make(tmp_path):
    out = stages(tmp_path, "fake-pass fake-fail fake-late")
    assert out.returncode != 0, out.stdout
    assert (tmp_path / "late-ran").exists(), "the stage after the failed one did not run"
    assert row(out.stdout, "fake-pass").split()[1] == "passed"
    assert "failed (exit 1)" in row(out.stdout, "fake-fail")
    assert row(out.stdout, "fake-late").split()[1] == "passed"


def test_all_stages_passing_passes(tmp_path):
    out = stages(tmp_path, "fake-pass fake-late")
    assert out.returncode == 0, out.stdout + out.stderr
    assert row(out.stdout, "total").split()[1] == "passed"


def test_the_run_writes_its_test_times(tmp_path):
    out = stages(tmp_path, "fake-pass fake-ping+fake-pong")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = (tmp_path / "test-times.md").read_text()
    assert "fake-ping+fake-pong" in doc and "## Budget and allowances" in doc


def test_a_stage_whose_prerequisite_fails_is_reported(tmp_path):
    out = stages(tmp_path, "fake-broken-prerequisite fake-pass")
    assert out.returncode != 0
    assert "did not start" in row(out.stdout, "fake-broken-prerequisite")
    assert row(out.stdout, "fake-pass").split()[1] == "passed"


def test_stages_joined_by_plus_run_side_by_side_and_are_reported_each(tmp_path):
    # Run one after the other, the first would wait for the second in vain.
    out = stages(tmp_path, "fake-pass fake-ping+fake-pong fake-late")
    assert out.returncode == 0, out.stdout + out.stderr
    for stage in ("fake-pass", "fake-ping", "fake-pong", "fake-late"):
        assert row(out.stdout, stage).split()[1] == "passed", out.stdout


def test_a_failure_beside_another_stage_fails_make_and_both_are_reported(tmp_path):
    out = stages(tmp_path, "fake-fail+fake-pass fake-late")
    assert out.returncode != 0
    assert "failed (exit 1)" in row(out.stdout, "fake-fail")
    assert row(out.stdout, "fake-pass").split()[1] == "passed"
    assert (tmp_path / "late-ran").exists()


def test_a_side_by_side_group_logs_its_wall_time_and_prefixes_each_stages_output(tmp_path):
    out = stages(tmp_path, "fake-ping+fake-pong")
    assert out.returncode == 0, out.stdout + out.stderr
    group = row(out.stdout, "fake-ping+fake-pong").split()
    assert group[1:4] == ["passed", "(side", "by"] and group[-1].isdigit()
    # The `timed` helper's line of each stage carries that stage's name.
    lines = out.stdout.split("== make test: stages ==", 1)[0].splitlines()
    assert any(line.startswith("[fake-ping] fake-ping ") for line in lines), out.stdout
    assert any(line.startswith("[fake-pong] fake-pong ") for line in lines), out.stdout


def make_variable(name: str) -> list[str]:
    out = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-f", "-", "print"],
                         input=f"print:\n\t@echo $({name})\n", cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_every_lab_module_the_stages_and_their_order_name_exists():
    """A renamed or moved module must not silently leave the lab half it was
    put in, or the front of lab-roles' queue (LONGEST_FIRST)."""
    from tests.integration.conftest import LONGEST_FIRST

    named = make_variable("LAB_FLEET_TESTS") + make_variable("LAB_GUARD_TESTS") + make_variable("LAB_CLI_TESTS")
    named += [f"tests/integration/{tail}" for tail in LONGEST_FIRST]
    assert named and [path for path in named if not (ROOT / path).is_file()] == []


def _pin(path: Path, name: str) -> str:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    (pin,) = [line for line in lines if line.lower().startswith(name + "==")]
    return pin.split("==", 1)[1]


def test_both_venvs_pin_one_ansible_core_so_the_primed_sanity_environments_are_found():
    # `make deps` makes ansible-test's sanity environments with the lint
    # venv's ansible-test (the sanity-venvs target); `make sanity` runs the
    # project venv's, which finds them only where the two are one version.
    requirements = ROOT / "requirements"
    assert _pin(requirements / "lint-venv.txt", "ansible-core") == _pin(requirements / "constraints.txt", "ansible-core")
