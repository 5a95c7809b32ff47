"""bench.pull: the synthetic fleet is the lab node's report under each
node's name, with the drift, stale and missing nodes the table counts; and
the table gives each step and the push ratio from the figures it is given."""

from __future__ import annotations

import datetime
import json

import pytest

bench = pytest.importorskip("bench.pull.__main__")
NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.timezone.utc)


def test_the_reports_are_the_lab_nodes_under_each_name():
    template = json.loads((bench.HERE / "node_report.json").read_text())
    made = dict(bench.reports(template, 300, NOW))
    assert len(made) == 297  # one in a hundred missing
    assert "gpu-node-00001" not in made and "gpu-node-00101" not in made
    one = json.loads(made["gpu-node-00000"])
    assert list(one["hosts"]) == ["gpu-node-00000"] and {r["host"] for r in one["records"]} == {"gpu-node-00000"}
    assert len(one["records"]) == len(template["records"])
    drifted = [n for n, text in made.items() if any(r["state"] == "drifted" for r in json.loads(text)["records"])]
    assert len(drifted) == 6 and "gpu-node-00003" in drifted
    stale = json.loads(made["gpu-node-00002"])
    assert datetime.datetime.fromisoformat(stale["finished"]) <= NOW - datetime.timedelta(hours=6)


def test_the_table_gives_every_step_and_the_ratio_to_push():
    results = {"when": "w", "cpus": 2, "python": "3.11", "nodes": 1000, "records_per_report": 107,
               "report_bytes": 28000, "fetched_mib": 26.0, "put_wall": 9.0, "hosts": 1000, "records": 99000,
               "not_reported": 20, "drifted_hosts": 20, "exit_code": 18,
               "steps": {"fetch": {"wall": 3.0, "cpu": 2.0, "peak_mib": 100},
                         "merge": {"wall": 0.5, "cpu": 0.5, "peak_mib": 150},
                         "write": {"wall": 2.5, "cpu": 2.5, "peak_mib": 300}},
               "push": {"nodes": 8, "when": "p", "cpu": 80.0, "wall": 100.0, "cpu_per_node": 10.0,
                        "wall_per_node": 12.5}}
    text = bench.markdown(results)
    assert "| merge | 0.5 | 0.5 | 150 |" in text
    assert "| pull reports: fetch + merge + write (1000 nodes) | 0.0050 |" in text
    assert "| ratio push / pull | 2000 |" in text
