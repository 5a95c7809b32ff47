"""The guard's reading of the cloud's scheduled maintenance, against the
loopback metadata service (tests/emulators/instance_metadata.py): AWS's
scheduled events as IMDS lists them, what has ended, and every fault that
must read as unknown, never as clear; the clouds whose events are not
read say so."""

from __future__ import annotations

import datetime
import json

import pytest

from tests.emulators.instance_metadata import Metadata, running

from ...conftest import load_helper

notice = load_helper("guard", "gpufleet_guard_notice.py", "gpufleet_guard_notice")
maintenance = load_helper("guard", "gpufleet_guard_maintenance.py", "gpufleet_guard_maintenance")

START = datetime.datetime(2026, 12, 9, 9, 0, 43, tzinfo=datetime.timezone.utc).timestamp()
END = datetime.datetime(2026, 12, 9, 9, 17, 23, tzinfo=datetime.timezone.utc).timestamp()


def event(code="system-reboot", state="active", event_id="instance-event-0d59937288b749b32", **changes):
    # As IMDS writes one (EC2's InstanceStatusEvent, "2 Jan 2006 15:04:05 GMT" times).
    body = {"NotBefore": "9 Dec 2026 09:00:43 GMT", "Code": code, "Description": "scheduled reboot",
            "EventId": event_id, "NotAfter": "9 Dec 2026 09:17:23 GMT", "State": state}
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def read(meta: Metadata, cloud: str = "aws", timeout: float = 2.0):
    with running(meta) as url:
        return maintenance.read(notice.reader_for(cloud, url, timeout=timeout), cloud)


def test_a_scheduled_reboot_is_read_with_its_window():
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event()])
    reading = read(meta)
    assert reading.state == maintenance.SCHEDULED and reading.problems == ()
    (window,) = reading.windows
    assert (window.code, window.event_id, window.not_before, window.not_after) == (
        "system-reboot", "instance-event-0d59937288b749b32", START, END)
    # IMDSv2: a token first, then the read with it.
    assert [c[:2] for c in meta.calls] == [("PUT", "/latest/api/token"),
                                           ("GET", "/latest/meta-data/events/maintenance/scheduled")]


@pytest.mark.parametrize("code", maintenance.AWS_CODES)
def test_every_documented_code_is_a_window(code):
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event(code)])
    assert [w.code for w in read(meta).windows] == [code]


@pytest.mark.parametrize("body", [None, "[]"], ids=["404", "empty list"])
def test_nothing_scheduled_is_clear(body):
    meta = Metadata("aws")
    meta.maintenance = body
    assert read(meta).state == maintenance.CLEAR


@pytest.mark.parametrize("state", ["completed", "canceled", "cancelled"])
def test_an_event_that_ended_is_not_scheduled(state):
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event(state=state)])
    assert read(meta).state == maintenance.CLEAR


def test_several_events_come_in_order_of_their_start():
    meta = Metadata("aws")
    meta.maintenance = json.dumps([
        event("instance-retirement", event_id="instance-event-2", NotBefore="20 Dec 2026 00:00:00 GMT", NotAfter=None),
        event("system-reboot", event_id="instance-event-1"),
        event("instance-stop", state="completed", event_id="instance-event-0"),
    ])
    reading = read(meta)
    assert [(w.event_id, w.not_after is None) for w in reading.windows] == [
        ("instance-event-1", False), ("instance-event-2", True)]


@pytest.mark.parametrize("fault", ["500", "garbage", "drop"])
def test_a_failing_service_is_unknown_never_clear(fault):
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event()])
    meta.fault = fault
    reading = read(meta)
    assert reading.state == maintenance.UNKNOWN and reading.windows == () and reading.detail


def test_a_service_that_hangs_is_unknown():
    meta = Metadata("aws", hang_seconds=1.5)
    meta.fault = "hang"
    reading = read(meta, timeout=0.5)
    assert reading.state == maintenance.UNKNOWN and "did not answer" in reading.detail


@pytest.mark.parametrize("body", ["not json", json.dumps({"Code": "system-reboot"}), "null"])
def test_a_body_that_is_no_list_of_events_is_unknown(body):
    meta = Metadata("aws")
    meta.maintenance = body
    reading = read(meta)
    assert reading.state == maintenance.UNKNOWN and "does not parse" in reading.detail


BROKEN = {
    "unknown code": (event("host-swap"), "a Code this guard does not know: 'host-swap'"),
    "unknown state": (event(state="postponed"), "a State this guard does not know: 'postponed'"),
    "no start": (event(NotBefore=None), "a time that is not text: None"),
    "start in another format": (event(NotBefore="2026-12-09T09:00:43Z"), "does not match format"),
    "no id": (event(EventId=None), "lacks its Code, EventId or State"),
    "not an object": ("system-reboot", "lacks its Code, EventId or State"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_an_event_that_cannot_be_read_is_unknown_alone_and_named(case):
    broken, says = BROKEN[case]
    meta = Metadata("aws")
    meta.maintenance = json.dumps([broken])
    reading = read(meta)
    assert reading.state == maintenance.UNKNOWN and reading.windows == ()
    assert len(reading.problems) == 1 and says in reading.problems[0]


def test_an_event_that_cannot_be_read_hides_neither_the_others_nor_the_schedule():
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event("host-swap", event_id="instance-event-9"), event()])
    reading = read(meta)
    assert reading.state == maintenance.SCHEDULED and [w.code for w in reading.windows] == ["system-reboot"]
    assert reading.problems == ("event instance-event-9: a Code this guard does not know: 'host-swap'",)


def test_an_expired_token_is_renewed_once():
    meta = Metadata("aws")
    meta.maintenance = json.dumps([event()])
    with running(meta) as url:
        reader = notice.reader_for("aws", url)
        assert maintenance.read(reader, "aws").state == maintenance.SCHEDULED
        meta.expire_tokens()
        assert maintenance.read(reader, "aws").state == maintenance.SCHEDULED
    assert [c[0] for c in meta.calls] == ["PUT", "GET", "GET", "PUT", "GET"]


@pytest.mark.parametrize("cloud", ["aliyun", "tencent", "huawei"])
def test_the_clouds_whose_events_are_not_read_say_so(cloud):
    reading = maintenance.read(notice.reader_for(cloud, "http://127.0.0.1:9"), cloud)
    assert reading.state == maintenance.NOT_READ and reading.detail == maintenance.NOT_READ_WHY[cloud]


@pytest.mark.parametrize(("minutes_before", "due"), [(31, False), (30, True), (0, True), (-5, True)])
def test_a_window_is_due_its_lead_before_it_starts(minutes_before, due):
    reading = maintenance.Reading(maintenance.SCHEDULED, (maintenance.Window("system-reboot", "e-1", START, END),))
    found = maintenance.due(reading, START - minutes_before * 60, lead_seconds=1800)
    assert [w.event_id for w in found] == (["e-1"] if due else [])


def test_nothing_is_due_from_a_reading_that_is_not_scheduled():
    window = maintenance.Window("system-reboot", "e-1", START, END)
    for state in (maintenance.CLEAR, maintenance.UNKNOWN, maintenance.NOT_READ):
        assert maintenance.due(maintenance.Reading(state, (window,)), START, 1800) == []
