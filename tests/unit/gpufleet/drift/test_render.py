from __future__ import annotations

import xml.etree.ElementTree as ET

from gpufleet.drift._render_html import html
from gpufleet.drift._render_junit import junit
from gpufleet.drift._render_text import table

from .helpers import rec, report

SAMPLE = [
    rec("lab-node-1", "baseline : Install", "in-sync"),
    rec("lab-node-2", "baseline : Configure chrony", "drifted",
        diff=[{"before_header": "/etc/chrony/chrony.conf", "before": "server a\n", "after": "server b\n"}]),
    rec("lab-node-3", "Gathering Facts", "unreachable", message="ssh: connect refused <b>"),
]


def test_table_lists_what_is_not_in_sync_and_the_summary():
    text = table(report(SAMPLE))
    assert "lab-node-2           drifted           baseline : Configure chrony" in text
    assert "lab-node-3           unreachable" in text
    assert "lab-node-1" not in text.split("\n\n", maxsplit=1)[0]
    assert "in sync 33%" in text and "exit 10" in text


def test_junit_has_one_suite_per_host_and_failures_for_drift():
    root = ET.fromstring(junit(report(SAMPLE)).split("?>", 1)[1])
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"lab-node-1", "lab-node-2", "lab-node-3"}
    assert suites["lab-node-2"].get("failures") == "1"
    assert "server b" in suites["lab-node-2"].find("testcase/failure").text
    assert suites["lab-node-3"].get("errors") == "1"
    assert suites["lab-node-1"].get("failures") == "0"


def test_html_is_self_contained_escaped_and_shows_the_drifted_node():
    page = html(report(SAMPLE))
    assert "<link" not in page and "<script" not in page and "http" not in page
    assert "Drifted: lab-node-2" in page
    assert "+server b" in page and "-server a" in page
    assert "&lt;b&gt;" in page and "refused <b>" not in page


def test_a_host_whose_run_ended_early_shows_how_much_was_not_scanned():
    ended = "not scanned: this host's run ended when 'Read the node' failed"
    records = [rec("lab-node-1", "baseline : Install", "in-sync"),
               rec("lab-node-2", "Read the node", "failed", role=None, message="boom"),
               *(rec("lab-node-2", f"baseline : Task {i}", "could-not-verify", not_scanned=True, message=ended)
                 for i in range(3))]
    r = report(records)
    text = table(r)
    assert "lab-node-2           not scanned       3 resources: this host's run ended when 'Read the node' failed" \
        in text
    # One line for the host, not one per resource; the JSON lists each.
    assert "Task 1" not in text
    assert r.to_dict()["summary"]["not_scanned"] == {"lab-node-2": 3}
    # Coverage counts what should have been read: 1 verified of 5.
    assert r.coverage_percent() == 20.0


def test_html_lists_a_host_with_a_failed_check_among_the_drifted_too():
    page = html(report([rec("lab-node-1", "baseline : Configure chrony", "drifted"),
                        rec("lab-node-2", "security : Check sshd", "failed", message="passwords on"),
                        rec("lab-node-2", "security : Load the firewall", "drifted")]))
    assert '<p id="drifted-nodes">Drifted: lab-node-1, lab-node-2</p>' in page
    assert '<p id="failed-nodes">Failed checks: lab-node-2</p>' in page
