"""tools/soak.py: N runs in a row beside CPU burners, stopping at the
first failure, and the burners always ended."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("soak", ROOT / "tools" / "soak.py")
soak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(soak)


# Counts only the burners of this soak (children of the same parent as the
# checker): another test may run a soak of its own at the same time.
CHECK_BURNERS = """
import os
busy = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        parent = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        busy += parent == os.getppid() and open(f"/proc/{{pid}}/cmdline").read().split("\\0")[2:3] == [{burn!r}]
    except (OSError, IndexError, ValueError):
        pass
assert busy == 2, busy
open({count!r}, "a").write("x\\n")
"""


@pytest.fixture
def burners(monkeypatch):
    started = []
    real = soak.start_burners

    def tracked(count):
        procs = real(count)
        started.extend(procs)
        return procs

    monkeypatch.setattr(soak, "start_burners", tracked)
    return started


def test_every_run_passes_beside_real_burners_and_they_are_ended(burners, tmp_path):
    count = tmp_path / "count"
    # Each run appends a line, and checks that both burners are really busy
    # beside it: two other processes running this interpreter's busy loop.
    command = [sys.executable, "-c", CHECK_BURNERS.format(count=str(count), burn=soak.BURN)]
    lines = []
    assert soak.soak(command, runs=3, burners=2, log=lines.append) == 3
    assert count.read_text().count("x") == 3
    assert len(burners) == 2 and all(p.poll() is not None for p in burners), "burners left running"
    assert lines[-1] == "soak: 3 of 3 runs passed under 2 CPU burner(s)"


def test_it_stops_at_the_first_failed_run(burners, tmp_path):
    count = tmp_path / "count"
    command = [sys.executable, "-c", f"import sys; open({str(count)!r}, 'a').write('x'); sys.exit(3)"]
    lines = []
    assert soak.soak(command, runs=5, burners=1, log=lines.append) == 0
    assert count.read_text() == "x"
    assert "failed (exit 3)" in lines[0]
    assert all(p.poll() is not None for p in burners)


def test_main_exits_non_zero_unless_every_run_passed():
    assert soak.main(["--runs", "2", "--burners", "0", "--", sys.executable, "-c", "pass"]) == 0
    assert soak.main(["--runs", "2", "--burners", "0", "--", sys.executable, "-c", "raise SystemExit(1)"]) == 1


@pytest.mark.parametrize("argv", [[], ["--runs", "0", "--", "true"], ["--burners", "-1", "--", "true"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        soak.main(argv)
    assert exc.value.code == 2
