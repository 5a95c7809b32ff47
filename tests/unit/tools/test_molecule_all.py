"""tools/molecule-all.sh's run order: every scenario but the hardware one
runs exactly once, the longest first (so two side by side never end with a
long one started last), and a scenario the order does not know still runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "molecule-all.sh"


def run_order():
    out = subprocess.run([str(SCRIPT), "--list"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_every_scenario_runs_once_and_the_gpu_one_never():
    on_disk = {p.parent.name for p in (ROOT / "extensions" / "molecule").glob("*/molecule.yml")}
    order = run_order()
    assert len(order) == len(set(order))
    assert set(order) == on_disk - {"gpu"}


def test_the_longest_scenario_starts_first_and_a_short_one_last():
    order = run_order()
    assert order[0] == "docker"
    assert order.index("security") < order.index("baseline") < order.index("cuda") == len(order) - 1


def test_named_scenarios_run_in_the_order_given():
    out = subprocess.run([str(SCRIPT), "--list", "nccl", "backup"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["nccl", "backup"]
