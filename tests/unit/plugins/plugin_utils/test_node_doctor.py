"""The node view of GPU faults from node_health's report and the guard's
repairs file: what is kept, and that no content of either file can make it
raise (a garbled file is "unreadable", with why)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _node_doctor as nd

NOW = 1764568800.0
XID_79 = {"kind": "xid", "code": 79, "pci": "0000:3b:00.0", "class": "RESTART_BM", "step": "reboot", "threshold": 1,
          "window_minutes": 60, "detail": "GPU has fallen off the bus", "count": 1, "undated": 0, "last": NOW - 60,
          "tripped": True}
LOG_UNREADABLE = {"kind": "kernel_log_unreadable", "code": None, "pci": "", "class": "unknown", "step": "none",
                  "threshold": None, "window_minutes": None, "detail": "dmesg: Operation not permitted", "count": 1,
                  "undated": 1, "last": None, "tripped": False}
# Counted, below its threshold: not shown.
BELOW = dict(XID_79, code=13, **{"class": "RESTART_APP"}, threshold=3, count=1, tripped=False)


def report(status="pass", faults=(), checks=()):
    return json.dumps({"time": "2026-12-01T06:00:00.123+00:00", "status": status, "checks": list(checks),
                       "faults": list(faults)})


def read(text):
    return (nd.READ, text)


ABSENT = (nd.ABSENT, "File not found: /run/gpufleet-guard/repairs.json")


def test_both_files_absent_are_not_reported_never_healthy():
    doctor = nd.doctor((nd.ABSENT, "File not found: /var/lib/gpufleet/health/report.json"), ABSENT, NOW)
    assert doctor == {"health": {"state": "absent", "detail": "File not found: /var/lib/gpufleet/health/report.json"},
                      "repairs": {"state": "absent", "detail": "File not found: /run/gpufleet-guard/repairs.json"}}


def test_a_health_pass_without_faults():
    health = nd.doctor(read(report(checks=[{"check": "ecc", "result": "pass", "detail": "ok"}])), ABSENT, NOW)["health"]
    assert health == {"state": "read", "time": "2026-12-01T06:00:00.123+00:00", "status": "pass", "checks": [],
                      "faults": []}


def test_a_tripped_xid_79_is_kept_with_its_fields_and_a_fault_below_its_threshold_is_not():
    failed = {"check": "xid", "result": "fail", "detail": "XID 79 on 0000:3b:00.0"}
    health = nd.doctor(read(report("fail", [XID_79, BELOW], [failed])), ABSENT, NOW)["health"]
    assert health["status"] == "fail" and health["checks"] == [failed]
    assert health["faults"] == [{key: XID_79[key] for key in nd.FAULT_FIELDS}]


def test_an_unknown_fault_is_kept_though_never_tripped():
    health = nd.doctor(read(report("unknown", [LOG_UNREADABLE])), ABSENT, NOW)["health"]
    assert [(f["kind"], f["class"], f["tripped"]) for f in health["faults"]] == [
        ("kernel_log_unreadable", "unknown", False)]


@pytest.mark.parametrize("text, why", [
    ("{not json", "not JSON"),
    ("", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('"pass"', "not a JSON object"),
    (json.dumps({"status": "fail", "faults": {"kind": "xid"}}), "'faults' is not a list of objects"),
    (json.dumps({"status": "fail", "faults": ["xid 79"]}), "'faults' is not a list of objects"),
    (json.dumps({"status": "fail", "checks": "all good"}), "'checks' is not a list of objects"),
])
def test_a_garbled_or_misshapen_report_is_unreadable_with_why(text, why):
    health = nd.doctor(read(text), ABSENT, NOW)["health"]
    assert health["state"] == "unreadable" and why in health["detail"], health


def test_a_fault_missing_fields_reads_as_unknown_not_as_an_error():
    health = nd.doctor(read(json.dumps({"faults": [{"kind": "xid", "code": 79}, {}]})), ABSENT, NOW)["health"]
    assert health["state"] == "read" and health["status"] == "unknown" and health["time"] is None
    first, second = health["faults"]
    assert first == {**dict.fromkeys(nd.FAULT_FIELDS), "kind": "xid", "code": 79, "class": "unknown",
                     "tripped": False}
    assert second["kind"] is None and second["class"] == "unknown"


def test_texts_are_cut_and_odd_values_kept_as_text():
    fault = dict(XID_79, detail="x" * 5000, pci={"bus": 59})
    (kept,) = nd.doctor(read(report("fail", [fault])), ABSENT, NOW)["health"]["faults"]
    assert len(kept["detail"]) == nd.DETAIL_CHARS and kept["pci"] == "{'bus': 59}"


def repair(state, closed_at=None, **extra):
    return {"id": "r1", "fault": "xid-79-0000:3b:00.0", "class": "RESTART_BM", "rung": "reboot",
            "first_rung": "reboot", "state": state, "why": "rebooted; waiting for a report", "opened_at": NOW - 600,
            "closed_at": closed_at, "steps": [{"step": "reboot", "at": NOW - 500, "ok": True, "detail": ""}],
            **extra}


def test_repairs_keep_the_open_ones_and_those_closed_within_a_day():
    text = json.dumps({"written": NOW - 30, "repairs": [
        repair("acting"), repair("cleared", NOW - 3600, id="r2"), repair("cleared", NOW - 2 * 86400, id="r3")]})
    repairs = nd.doctor(ABSENT, read(text), NOW)["repairs"]
    assert repairs["state"] == "read" and repairs["written"] == NOW - 30
    assert [(r["state"], r["closed_at"]) for r in repairs["items"]] == [("acting", None), ("cleared", NOW - 3600)]
    assert set(repairs["items"][0]) == set(nd.REPAIR_FIELDS)  # no steps, no id


def test_without_the_node_clock_every_repair_in_the_file_is_kept():
    text = json.dumps({"written": NOW, "repairs": [repair("cleared", NOW - 2 * 86400)]})
    assert len(nd.doctor(ABSENT, read(text))["repairs"]["items"]) == 1


@pytest.mark.parametrize("text", ["[]", "{}", json.dumps({"repairs": {"r1": {}}}), json.dumps({"repairs": ["r1"]}),
                                  "\x00"])
def test_a_misshapen_repairs_file_is_unreadable(text):
    repairs = nd.doctor(ABSENT, read(text), NOW)["repairs"]
    assert repairs["state"] == "unreadable" and repairs["detail"], repairs
    with pytest.raises(ValueError):
        nd.load_repairs(text)


def test_a_file_the_node_could_not_give_is_unreadable_with_its_reason():
    doctor = nd.doctor((nd.UNREADABLE, "File is not readable: /var/lib/gpufleet/health/report.json"), ABSENT, NOW)
    assert doctor["health"] == {"state": "unreadable",
                                "detail": "File is not readable: /var/lib/gpufleet/health/report.json"}
