"""bench.fleet.revisions without a lab: what a no-op run counts, and the
report's ratios."""

import pytest

from bench.fleet import revisions

RECAP = """PLAY RECAP *********
lab-node-1                 : ok=83   changed={changed}    unreachable=0    failed=0    skipped=15   rescued=0    ignored=0
"""


@pytest.fixture
def runs_print(monkeypatch, tmp_path):
    monkeypatch.setattr(revisions, "CACHE", tmp_path)

    def fake(changed):
        def measure(argv, env, log):
            log.write_text(RECAP.format(changed=changed))
            return {"rc": 0, "wall": 20.0, "cpu": 8.0, "busy_cpu": 14.0}
        monkeypatch.setattr(revisions, "measure", measure)
    return fake


def test_a_noop_counts_ok_and_skipped_tasks(runs_print, tmp_path):
    runs_print(0)
    result = revisions.noop(tmp_path, tmp_path, "after-0")
    assert (result["evaluated"], result["ok"], result["skipped"], result["nodes"]) == (98, 83, 15, 1)


def test_a_run_that_changed_something_is_not_a_figure(runs_print, tmp_path):
    runs_print(2)
    with pytest.raises(revisions.NotANoOp, match="after-0"):
        revisions.noop(tmp_path, tmp_path, "after-0")


def test_the_report_gives_ratios_within_the_run():
    summary = {"before": {"evaluated": 159, "ok": 111, "skipped": 48, "nodes": 1, "cpu_median": 12.0,
                          "busy_cpu_median": 24.0, "wall_median": 30.0},
               "after": {"evaluated": 98, "ok": 83, "skipped": 15, "nodes": 1, "cpu_median": 8.0,
                         "busy_cpu_median": 15.0, "wall_median": 20.0}}
    text = revisions.markdown({"when": "now", "before": "a9976b0", "after": "abc1234", "rounds": 3,
                               "summary": summary})
    assert "| before (a9976b0) | 1 | 159 | 111 | 48 | 12.0 | 24.0 | 30.0 |" in text
    assert "- tasks evaluated, after / before: 0.62" in text
    assert "- controller CPU, after / before: 0.67" in text
    assert "- machine CPU (the node's side too), after / before: 0.62" in text


def test_a_measured_run_has_its_exit_status_cpu_and_the_machine_s_busy_cpu(tmp_path):
    from bench.fleet.__main__ import measure

    figures = measure(["sh", "-c", "echo ran; exit 3"], {"PATH": "/usr/bin:/bin"}, tmp_path / "run.log")
    assert figures["rc"] == 3 and (tmp_path / "run.log").read_text() == "ran\n"
    assert set(figures) == {"rc", "cpu", "wall", "busy_cpu"} and figures["busy_cpu"] >= 0
