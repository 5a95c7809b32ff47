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
