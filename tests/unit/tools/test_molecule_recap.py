from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("molecule_recap", ROOT / "tools" / "molecule_recap.py")
recap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recap)


def log(second_check_changed: int) -> str:
    def section(action, changed):
        return (
            f"INFO     baseline ➜ {action}: Executing\n"
            "  │ PLAY RECAP ***\n"
            f"  │ \x1b[33mbaseline-debian12          : ok=26   changed={changed}    unreachable=0    failed=0\x1b[0m\n"
        )

    return section("check", 8) + section("converge", 12) + section("idempotence", 0) + section("check", second_check_changed)


def test_reads_the_last_check_not_the_first():
    assert recap.last_check_recap(log(0))["baseline-debian12"]["changed"] == 0


def test_fails_when_check_on_a_converged_node_wants_changes(tmp_path):
    path = tmp_path / "m.log"
    path.write_text(log(2), encoding="utf-8")
    assert recap.main(str(path)) == 1
    path.write_text(log(0), encoding="utf-8")
    assert recap.main(str(path)) == 0


def test_refuses_a_log_without_two_checks():
    with pytest.raises(SystemExit, match="expected two check actions, found 1"):
        recap.last_check_recap("INFO     x ➜ check: Executing\n")
