"""bench.pull.node: a report is summed up by state; the push scan and the
pull run must both find the converged node in sync and read as much as
each other; and the table gives the median rounds and the ratios pull /
push and without Mitogen / with it."""

from __future__ import annotations

import pytest

bench = pytest.importorskip("bench.pull.node")


def report(*states, exit_code=0):
    return {"records": [{"state": s, "resource": f"r{i}"} for i, s in enumerate(states)],
            "summary": {"exit_code": exit_code}}


def test_a_report_is_summed_up_by_state():
    summed = bench.summary(report("in-sync", "drifted", "in-sync", exit_code=2))
    assert {k: v for k, v in summed.items() if k != "resources_sha256"} == {
        "resources": 3, "states": {"in-sync": 2, "drifted": 1}, "exit_code": 2}


def test_a_nodes_report_has_its_exit_code_at_the_top():
    node = {"records": [{"state": "could-not-verify", "resource": "r0"}], "exit_code": 16}
    assert bench.summary(node)["exit_code"] == 16


def test_the_same_resources_in_another_order_are_the_same_set():
    one = report("in-sync", "in-sync")
    other = dict(one, records=list(reversed(one["records"])))
    assert bench.summary(one)["resources_sha256"] == bench.summary(other)["resources_sha256"]
    renamed = dict(one, records=[one["records"][0], {"state": "in-sync", "resource": "r9"}])
    assert bench.summary(one)["resources_sha256"] != bench.summary(renamed)["resources_sha256"]


@pytest.mark.parametrize(("push", "pull", "says"), [
    ({"rc": 0, "resources": 3, "states": {"in-sync": 3}}, {"rc": 2, "resources": 3, "states": {"in-sync": 2, "drifted": 1}},
     "pull: exit 2"),
    ({"rc": 0, "resources": 3, "states": {"in-sync": 2, "could-not-verify": 1}},
     {"rc": 0, "resources": 3, "states": {"in-sync": 3}}, "push: exit 0, states"),
    ({"rc": 0, "resources": 3, "states": {"in-sync": 3}}, {"rc": 0, "resources": 2, "states": {"in-sync": 2}},
     "push read 3 resources, pull 2"),
    ({"rc": 0, "resources": 0, "states": {}}, {"rc": 0, "resources": 0, "states": {}}, "push: exit 0, states {}"),
])
def test_both_must_find_the_converged_node_in_sync_and_read_as_much(push, pull, says):
    with pytest.raises(bench.NotANoOp, match=says.replace("(", r"\(")):
        bench.check_same(push, pull, "pull")


def test_the_same_reading_in_sync_passes():
    row = {"rc": 0, "resources": 3, "states": {"in-sync": 3}, "resources_sha256": "a"}
    bench.check_same(row, dict(row), "pull")


def test_as_many_resources_but_not_the_same_ones_is_said():
    row = {"rc": 0, "resources": 3, "states": {"in-sync": 3}, "resources_sha256": "a"}
    with pytest.raises(bench.NotANoOp, match="read as many resources, but not the same ones"):
        bench.check_same(row, dict(row, resources_sha256="b"), "pull")


def test_the_table_takes_the_median_rounds_and_the_ratio():
    push = [{"wall": w, "busy_cpu": c, "controller_cpu": k, "resources": 107}
            for w, c, k in ((20.0, 30.0, 12.0), (22.0, 33.0, 13.0), (21.0, 31.0, 12.5))]
    pull = [{"wall": w, "busy_cpu": c} for w, c in ((40.0, 36.0), (42.0, 39.0), (41.0, 37.0))]
    linear = [{"wall": w, "busy_cpu": c} for w, c in ((82.0, 74.0), (84.0, 78.0), (80.0, 72.0))]
    results = {"rounds": 3, "when": "2026-12-06 08:00 UTC", "cpus": 2, "push": push, "pull": pull,
               "pull_linear": linear,
               "pull_setup": {"wall": 60.0, "cpu": 9.0}, "first_converge": {"wall": 200.0}}
    text = bench.markdown(results)
    assert "| push | 21.0 | 31.0 | 12.5 |" in text
    assert "| pull | 41.0 | 37.0 | 0 |" in text
    assert "| pull, no Mitogen | 82.0 | 74.0 | 0 |" in text
    assert "| pull / push | 1.95 | 1.19 | |" in text
    assert "| no Mitogen / Mitogen | 2.00 | 2.00 | |" in text
    assert "the same 107 resources" in text


def test_fewer_than_one_round_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err
