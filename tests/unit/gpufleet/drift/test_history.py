from __future__ import annotations

from gpufleet.drift import _history

from .helpers import rec, report


def run(path, finished, records):
    r = report(records)
    r.finished = finished
    _history.record(path, r)
    return r


def test_first_seen_is_the_start_of_an_unbroken_drift(tmp_path):
    store = tmp_path / "h.jsonl"
    run(store, "t1", [rec("a", "x", "drifted")])
    r2 = run(store, "t2", [rec("a", "x", "drifted"), rec("b", "y", "drifted")])
    assert {(r["host"], r["first_seen"]) for r in r2.records} == {("a", "t1"), ("b", "t2")}
    run(store, "t3", [rec("a", "x", "in-sync")])  # fixed...
    r4 = run(store, "t4", [rec("a", "x", "drifted")])  # ...and drifted again
    assert r4.records[0]["first_seen"] == "t4"
    assert len(store.read_text().splitlines()) == 4
