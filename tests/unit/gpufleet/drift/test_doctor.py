"""The node view of GPU faults in the drift report (a host's "doctor", from
gpufleet.cloud.node_facts): the table's line, the page's block, the JSON,
pull-mode merges; never a state or an exit bit; never a failed render,
whatever a report holds."""

from __future__ import annotations

import datetime
import json
import re

import pytest

from gpufleet.drift import _store
from gpufleet.drift._render_html import context, html
from gpufleet.drift._render_text import table

from .helpers import Page, rec, report

XID_79 = {"kind": "xid", "code": 79, "pci": "0000:3b:00.0", "class": "RESTART_BM", "step": "reboot", "threshold": 1,
          "window_minutes": 60, "count": 1, "undated": 0, "last": 1764568800.0, "tripped": True,
          "detail": "GPU has fallen off the bus"}
LOG_UNREADABLE = {"kind": "kernel_log_unreadable", "code": None, "pci": "", "class": "unknown", "step": "none",
                  "threshold": None, "window_minutes": None, "count": 1, "undated": 1, "last": None, "tripped": False,
                  "detail": "dmesg: Operation not permitted"}
REBOOT = {"fault": "xid-79-0000:3b:00.0", "class": "RESTART_BM", "rung": "reboot", "first_rung": "reboot",
          "state": "acting", "why": "rebooting the instance", "opened_at": 1764568860.0, "closed_at": None}
CLEARED = dict(REBOOT, fault="xid-48-0000:1b:00.0", state="cleared", closed_at=1764568900.0)
ABSENT = {"state": "absent", "detail": "File not found: /run/gpufleet-guard/repairs.json"}


def health(status="pass", faults=(), checks=()):
    return {"state": "read", "time": "2026-12-01T06:00:00.123+00:00", "status": status, "checks": list(checks),
            "faults": list(faults)}


def fleet(**doctors):
    """One in-sync record per host, each host with the doctor given (None:
    a report without one)."""
    r = report([rec(host, "baseline : Install", "in-sync") for host in sorted(doctors)])
    for host, doctor in doctors.items():
        if doctor is not None:
            r.hosts[host]["doctor"] = doctor
    return r


FLEET = fleet(
    **{"gpu-1": {"health": health("fail", [XID_79]), "repairs": {"state": "read", "written": 1764568870.0,
                                                                 "items": [REBOOT, CLEARED]}},
       "gpu-2": {"health": health(), "repairs": ABSENT},
       "gpu-3": {"health": {"state": "absent", "detail": "File not found: /var/lib/gpufleet/health/report.json"},
                 "repairs": ABSENT},
       "gpu-4": {"health": {"state": "unreadable", "detail": "the health report is not JSON (Expecting value)"},
                 "repairs": {"state": "unreadable", "detail": "File is not readable: /run/gpufleet-guard/repairs.json"}},
       "gpu-5": {"health": health("unknown", [LOG_UNREADABLE]), "repairs": ABSENT},
       "gpu-6": None})


def lines(text, word="gpu-faults"):
    return {line.split()[0]: line.split(word, 1)[1].strip() for line in text.splitlines() if f" {word} " in line}


def test_the_table_has_a_line_for_each_host_with_something_to_say_and_the_exit_code_is_unchanged():
    text = table(FLEET)
    assert lines(text) == {
        "gpu-1": "health fail, XID 79 (RESTART_BM) on 0000:3b:00.0 x1, repair reboot acting",
        "gpu-3": "no node_health report on the node",
        "gpu-4": "node_health report unreadable: the health report is not JSON (Expecting value), "
                 "guard repairs file unreadable: File is not readable: /run/gpufleet-guard/repairs.json",
        "gpu-5": "health unknown, kernel_log_unreadable (unknown) x1 (seen, never tripped)",
    }
    # Faults are not drift: every host in sync, exit 0.
    assert FLEET.exit_code() == 0 and FLEET.in_sync_percent() == 100.0
    assert "(every resource on every host is in sync)" in text and text.rstrip().endswith("exit 0")


def test_a_failed_health_check_without_a_fault_says_which():
    r = fleet(n1={"health": health("fail", checks=[{"check": "ecc", "result": "fail", "detail": "2 uncorrected"}]),
                  "repairs": ABSENT})
    assert lines(table(r)) == {"n1": "health fail (ecc: 2 uncorrected)"}


def test_a_repair_that_waits_says_why():
    waiting = dict(REBOOT, state="waiting", why="the breaker holds: 2 of 2 in group all repairing")
    r = fleet(n1={"health": health(), "repairs": {"state": "read", "written": 1.0, "items": [waiting]}})
    assert lines(table(r)) == {"n1": "repair reboot waiting: the breaker holds: 2 of 2 in group all repairing"}


def test_the_json_carries_each_hosts_doctor_and_the_model_names_the_hosts_with_tripped_faults():
    out = FLEET.to_dict()
    assert out["hosts"]["gpu-1"]["doctor"]["health"]["faults"][0]["code"] == 79
    assert out["hosts"]["gpu-1"]["state"] == "in-sync" and "doctor" not in out["hosts"]["gpu-6"]
    assert out["summary"]["exit_code"] == 0
    assert FLEET.faulted_hosts() == ["gpu-1"]


def test_the_page_shows_the_faults_in_each_hosts_section_and_opens_those_acting():
    text = html(FLEET)
    page = Page(text)
    assert re.search(r'id="faulted-nodes">Tripped GPU faults \(not drift\): gpu-1<', text)
    one = page.sections["gpu-1"].text
    assert "node_health: fail at 2026-12-01T06:00:00.123+00:00" in one
    assert "XID 79 (RESTART_BM) on 0000:3b:00.0 x1 tripped" in one and "1 of 1 in 60 min" in one
    assert "last 2025-12-01T06:00:00+00:00" in one and "GPU has fallen off the bus" in one
    assert "rung reboot" in one and "acting" in one and "rebooting the instance" in one
    assert "xid-48-0000:1b:00.0" in one and "closed 2025-12-01T06:01:40+00:00" in one
    assert "No tripped or unknown fault." in page.sections["gpu-2"].text
    assert "repair is off on this node" in page.sections["gpu-2"].text
    assert "node_health's report: not reported" in page.sections["gpu-3"].text
    four = page.sections["gpu-4"].text
    assert "node_health's report: unreadable (the health report is not JSON" in four
    assert "The guard's repairs: unreadable (File is not readable" in four
    assert "seen, never tripped" in page.sections["gpu-5"].text
    assert "Not in this report" in page.sections["gpu-6"].text
    opened = set(re.findall(r'<details class="host"[^>]*data-host="([^"]+)" open>', text))
    assert opened == {"gpu-1"}


def test_a_hostile_detail_is_escaped_on_the_page():
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    r = fleet(n1={"health": health("fail", [dict(XID_79, detail=hostile, pci=hostile)]),
                  "repairs": {"state": "read", "written": 1.0, "items": [dict(REBOOT, why=hostile, fault=hostile)]}})
    text = html(r)
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;" in text and hostile in Page(text).sections["n1"].text


@pytest.mark.parametrize("doctor", [
    {},
    {"health": "fail", "repairs": []},
    {"health": {"state": "read"}, "repairs": {"state": "read"}},
    {"health": {"state": "read", "status": None, "faults": [{}, "xid 79", None, {"tripped": "yes"}],
                "checks": "all"},
     "repairs": {"state": "read", "items": [{}, 7]}},
    {"health": {"state": "something new"}, "repairs": {"state": None}},
    {"health": {"state": "read", "faults": [{"kind": "xid", "code": 79, "tripped": True, "last": "yesterday"},
                                            {"kind": "xid", "code": 79, "tripped": True, "last": 1e20}]}},
])
def test_a_doctor_of_any_shape_renders_as_unknown_and_never_fails(doctor):
    r = fleet(n1=doctor)
    text, page = table(r), html(r)
    assert "n1" in Page(page).sections and r.exit_code() == 0 and text
    context(r)


def test_an_entry_without_its_fields_shows_unknown():
    r = fleet(n1={"health": {"state": "read", "faults": [{"tripped": True}]},
                  "repairs": {"state": "read", "items": [{}]}})
    assert lines(table(r)) == {"n1": "health unknown, unknown (unknown) xunknown, repair unknown unknown"}
    section = Page(html(r)).sections["n1"].text
    assert "class unknown" in section and "rung unknown" in section


def test_a_pull_mode_merge_keeps_each_nodes_doctor():
    now = datetime.datetime(2026, 12, 1, 6, 30, tzinfo=datetime.timezone.utc)
    doctor = {"health": health("fail", [XID_79]), "repairs": ABSENT}
    own = {"version": 1, "started": "2026-12-01T06:00:00+00:00", "finished": "2026-12-01T06:01:00+00:00",
           "check_mode": True, "exit_code": 0, "records": [rec("a", "baseline : Install", "in-sync")],
           "hosts": {"a": {"provider": "aws", "region": "r", "gpu_model": "A10G", "groups": [], "versions": {},
                           "doctor": doctor}}}
    fetched = {"a": _store.Fetched("p/a.json", text=json.dumps(own))}
    inventory = {"a": {"provider": "aws", "region": "r", "gpu_model": "none", "groups": ["gpu"], "versions": {}}}
    merged = _store.merge(fetched, inventory, "s3://fleet/p", datetime.timedelta(minutes=90), now=now)
    assert merged.hosts["a"]["doctor"] == doctor and merged.faulted_hosts() == ["a"]
