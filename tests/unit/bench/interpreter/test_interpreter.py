"""bench.interpreter: the same play on a podman node with the interpreter
discovered and named; the table takes the median round of each and the
ratio within the run, and only the node's own exec events count."""

from __future__ import annotations

import subprocess

import pytest

bench = pytest.importorskip("bench.interpreter.__main__")


def test_the_table_takes_the_median_round_and_the_ratio():
    figures = {"12": {"discovered": [(9.0, 8.0, 92), (12.0, 9.0, 93), (10.0, 7.5, 92)],
                      "named": [(4.0, 3.0, 2), (5.0, 3.5, 2), (4.5, 2.5, 3)]}}
    text = bench.table(figures, 3)
    assert "| 12 | 10.0 | 4.5 | 2.22 | 8.0 | 3.0 | 92 | 2 |" in text


def test_the_named_alternative_is_what_the_test_nodes_use():
    assert bench.ALTERNATIVES["named"] == {"ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3"}
    assert bench.ALTERNATIVES["discovered"] == {}
    assert bench.PLAY.count("ansible.builtin.stat:") == bench.TASKS


def test_every_exec_call_counts_and_the_log_starts_again(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.shutil, "which", lambda name: "/bin/true")
    wrappers, log = bench.counting_podman(tmp_path)
    for argv in (["exec", "--interactive", "--", "node", "python3.13", "-c", "x"], ["exec", "node", "true"],
                 ["rm", "node"]):
        assert subprocess.run([f"{wrappers}/podman", *argv], check=False).returncode == 0
    assert bench.execs(log) == 2
    assert bench.execs(log) == 0


def test_a_run_gets_its_wall_and_the_machines_busy_cpu_added(monkeypatch):
    jiffies = iter([1000, 1000 + 3 * bench.os.sysconf("SC_CLK_TCK")])
    monkeypatch.setattr(bench, "busy_jiffies", lambda: next(jiffies))
    figures = bench.with_busy_cpu(lambda: {"rc": 0})
    assert figures["rc"] == 0 and figures["busy_cpu"] == 3.0 and figures["wall"] >= 0
