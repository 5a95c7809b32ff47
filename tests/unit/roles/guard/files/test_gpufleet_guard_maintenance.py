"""The guard's reading of the cloud's scheduled maintenance, against the
loopback metadata service (tests/emulators/instance_metadata.py): AWS's
scheduled events as IMDS lists them, what has ended, and every fault that
must read as unknown, never as clear. Alibaba's, Tencent's and Huawei's,
as their APIs list them (the instance program prints them; its calls are
in test_gpufleet_guard_stop_events.py): each event that cannot be read,
and the background call that never holds up a poll."""

from __future__ import annotations

import datetime
import json
import threading

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


def test_without_the_instance_program_the_api_clouds_say_why():
    why = "not read: the cloud's API needs guard_stop_instance_id and guard_stop_region"
    for cloud in maintenance.API_CLOUDS:
        reading = maintenance.read(why, cloud)
        assert reading.state == maintenance.NOT_READ and reading.detail == why
    # A metadata reader is no source of theirs: not read, never clear.
    reading = maintenance.read(notice.reader_for("aliyun", "http://127.0.0.1:9"), "aliyun")
    assert reading.state == maintenance.NOT_READ


# -- the clouds that document their events through the API only ------------
# Each as its API reference writes one (DescribeInstanceHistoryEvents'
# InstanceSystemEventType, DescribeTaskInfo's RepairTaskInfo with CVM's
# UTC+8 times, ListScheduledEvents' response example).
ALIYUN = {"EventId": "e-uf64yvznlao4jl2c0001", "EventType": {"Code": 1, "Name": "SystemMaintenance.Redeploy"},
          "EventCycleStatus": {"Code": 24, "Name": "Scheduled"}, "NotBefore": "2026-12-09T09:00:43Z",
          "EventPublishTime": "2026-12-07T06:32:31Z", "Reason": "host retirement"}
TENCENT = {"TaskId": "rep-0a1b2c3d", "TaskTypeId": 101, "TaskTypeName": "instance hidden danger", "TaskStatus": 4,
           "CreateTime": "2026-12-07 10:00:00", "AuthTime": "2026-12-09 17:00:43", "EndTime": ""}
HUAWEI = {"id": "0ead944a-72e8-494f-89ba-5846fb7ac5c0", "type": "instance-redeploy", "state": "scheduled",
          "publish_time": "2026-12-07T12:55:36Z", "start_time": None, "finish_time": None,
          "not_before": "2026-12-09T09:00:43Z", "not_after": "2026-12-09T11:00:43Z",
          "not_before_deadline": "2026-12-09T09:00:43Z", "description": "redeployed on new hosts"}
CREATED = datetime.datetime(2026, 12, 7, 2, 0, 0, tzinfo=datetime.timezone.utc).timestamp()


def api(cloud, *events, rc=0, outcome="read"):
    out = json.dumps({"outcome": outcome, "events": list(events), "detail": "throttled"})
    return maintenance.api_reading(cloud, rc, "a warning on the first line\n" + out, "")


def changed(event, **changes):
    body = dict(event, **changes)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(("cloud", "event", "code", "start", "end"), [
    ("aliyun", ALIYUN, "SystemMaintenance.Redeploy", START, None),
    ("tencent", TENCENT, "repair-task-101", START, None),
    ("huawei", HUAWEI, "instance-redeploy", START, START + 7200),
])
def test_each_api_clouds_scheduled_event_is_a_window(cloud, event, code, start, end):
    reading = api(cloud, event)
    assert reading.state == maintenance.SCHEDULED and reading.problems == ()
    (window,) = reading.windows
    assert (window.code, window.not_before, window.not_after) == (code, start, end)


@pytest.mark.parametrize("code", maintenance.ALIYUN_CODES)
def test_every_listed_alibaba_event_type_is_a_window(code):
    assert api("aliyun", changed(ALIYUN, EventType={"Code": 1, "Name": code})).state == maintenance.SCHEDULED


@pytest.mark.parametrize("state", ["Scheduled", "Executing", "Inquiring"])
def test_alibabas_active_events_are_windows(state):
    assert api("aliyun", changed(ALIYUN, EventCycleStatus={"Code": 1, "Name": state})).state == maintenance.SCHEDULED


@pytest.mark.parametrize(("cloud", "event"), [
    ("aliyun", changed(ALIYUN, EventCycleStatus={"Code": 1, "Name": s})) for s in maintenance.ALIYUN_ENDED] + [
    ("tencent", changed(TENCENT, TaskStatus=s)) for s in maintenance.TENCENT_ENDED] + [
    ("huawei", changed(HUAWEI, state=s)) for s in maintenance.HUAWEI_ENDED])
def test_an_api_event_that_ended_is_clear(cloud, event):
    assert api(cloud, event).state == maintenance.CLEAR


def test_a_tencent_task_pending_authorization_or_in_progress_opens_when_it_was_created():
    # The cloud may carry it out from then on: due at once, whatever AuthTime says.
    for status in (1, 2):
        (window,) = api("tencent", changed(TENCENT, TaskStatus=status)).windows
        assert window.not_before == CREATED
        assert maintenance.due(api("tencent", changed(TENCENT, TaskStatus=status)), CREATED + 60, 1800)
    # Scheduled without its time: from its creation too, never "none".
    (window,) = api("tencent", changed(TENCENT, AuthTime="")).windows
    assert window.not_before == CREATED


def test_a_huawei_event_without_a_start_opens_at_its_deadline_or_when_it_started():
    (window,) = api("huawei", changed(HUAWEI, state="inquiring", not_before=None)).windows
    assert window.not_before == START
    (window,) = api("huawei", changed(HUAWEI, state="executing", not_before=None, not_before_deadline=None,
                                      start_time="2026-12-09T08:00:43Z")).windows
    assert window.not_before == START - 3600


API_BROKEN = {
    "aliyun unknown type": ("aliyun", changed(ALIYUN, EventType={"Code": 9, "Name": "SystemMaintenance.Swap"}),
                            "an EventType this guard does not know: 'SystemMaintenance.Swap'"),
    "aliyun unknown state": ("aliyun", changed(ALIYUN, EventCycleStatus={"Code": 9, "Name": "Postponed"}),
                             "an EventCycleStatus this guard does not know: 'Postponed'"),
    "aliyun no start": ("aliyun", changed(ALIYUN, NotBefore=None), "NotBefore: a time that is not text: None"),
    "aliyun bad start": ("aliyun", changed(ALIYUN, NotBefore="9 Dec 2026"), "NotBefore: Invalid isoformat"),
    "aliyun no type": ("aliyun", changed(ALIYUN, EventType="SystemMaintenance.Reboot"), "lacks its EventId"),
    "tencent unknown type": ("tencent", changed(TENCENT, TaskTypeId=199),
                             "a TaskTypeId this guard does not know: 199"),
    "tencent unknown status": ("tencent", changed(TENCENT, TaskStatus=9), "a TaskStatus this guard does not know: 9"),
    "tencent status as text": ("tencent", changed(TENCENT, TaskStatus="4"), "lacks its TaskId, TaskTypeId"),
    "tencent no creation": ("tencent", changed(TENCENT, TaskStatus=1, CreateTime=None),
                            "CreateTime: a time that is not text"),
    "huawei unknown type": ("huawei", changed(HUAWEI, type="instance-swap"),
                            "a type this guard does not know: 'instance-swap'"),
    "huawei unknown state": ("huawei", changed(HUAWEI, state="paused"), "a state this guard does not know: 'paused'"),
    "huawei no time at all": ("huawei", changed(HUAWEI, not_before=None, not_before_deadline=None),
                              "a time that is not text"),
    "huawei bad end": ("huawei", changed(HUAWEI, not_after="soon"), "Invalid isoformat"),
    "not an object": ("huawei", "instance-redeploy", "an event that is not an object"),
}


@pytest.mark.parametrize("case", list(API_BROKEN))
def test_an_api_event_that_cannot_be_read_is_unknown_alone_and_named(case):
    cloud, broken, says = API_BROKEN[case]
    reading = api(cloud, broken)
    assert reading.state == maintenance.UNKNOWN and reading.windows == ()
    assert len(reading.problems) == 1 and says in reading.problems[0], reading.problems
    # Beside a good one it hides neither the window nor itself.
    good = {"aliyun": ALIYUN, "tencent": TENCENT, "huawei": HUAWEI}[cloud]
    reading = api(cloud, good, broken)
    assert reading.state == maintenance.SCHEDULED and len(reading.windows) == 1 and len(reading.problems) == 1


@pytest.mark.parametrize(("rc", "stdout", "says"), [
    (None, "", "did not finish: it timed out"),
    (1, json.dumps({"outcome": "retry", "detail": "DescribeTaskInfo: RequestLimitExceeded"}), "RequestLimitExceeded"),
    (2, json.dumps({"outcome": "refused", "detail": "no credentials"}), "exited 2: refused"),
    (0, "", "without its report"),
    (0, "Traceback (most recent call last):", "without its report"),
    (0, json.dumps(["not", "a", "report"]), "without its report"),
    (0, json.dumps({"outcome": "read"}), "no list of events"),
    (0, json.dumps({"outcome": "read", "events": {"e-1": {}}}), "no list of events"),
    (0, json.dumps({"outcome": "stopped", "events": []}), "exited 0: stopped"),
])
def test_an_events_call_that_failed_or_answered_wrong_is_unknown_never_clear(rc, stdout, says):
    reading = maintenance.api_reading("tencent", rc, stdout, "it timed out")
    assert reading.state == maintenance.UNKNOWN and says in reading.detail


class Runs:
    """A stand-in for the instance program: each call blocks until the
    test lets it answer."""

    def __init__(self):
        self.calls, self.answers = [], []
        self.go = threading.Event()

    def __call__(self, argv, timeout):
        self.calls.append((argv, timeout))
        self.go.wait(10)
        self.go.clear()
        return self.answers.pop(0)


def ran(rc, *events, outcome="read"):
    return maintenance.process.Ran(rc, json.dumps({"outcome": outcome, "events": list(events)}))


def test_the_api_source_reads_in_the_background_never_holding_up_a_poll():
    runs = Runs()
    source = maintenance.ApiSource("huawei", ["python3", "stop.py", "stop.json"], interval=300, timeout=90,
                                   runner=runs, retry=60)
    runs.answers = [ran(1, outcome="retry"), ran(0, HUAWEI), ran(0)]
    # The first poll starts the call and does not wait for it: unknown.
    assert source.reading(1000).state == maintenance.UNKNOWN
    assert runs.calls == [(["python3", "stop.py", "stop.json", "events"], 90)]
    # Polls while it runs start no second call.
    assert source.reading(1100).state == maintenance.UNKNOWN and len(runs.calls) == 1
    runs.go.set()
    source.wait(10)
    # A failed call: unknown, and tried again after `retry`, not `interval`.
    assert source.reading(1059).state == maintenance.UNKNOWN and len(runs.calls) == 1
    assert source.reading(1060).state == maintenance.UNKNOWN and len(runs.calls) == 2
    runs.go.set()
    source.wait(10)
    assert source.reading(1061).state == maintenance.SCHEDULED
    # A good reading holds for `interval`; then the next call.
    assert source.reading(1359).state == maintenance.SCHEDULED and len(runs.calls) == 2
    assert source.reading(1360).state == maintenance.SCHEDULED and len(runs.calls) == 3
    runs.go.set()
    source.wait(10)
    assert maintenance.read(source, "huawei", 1361).state == maintenance.CLEAR


@pytest.mark.parametrize(("minutes_before", "due"), [(31, False), (30, True), (0, True), (-5, True)])
def test_a_window_is_due_its_lead_before_it_starts(minutes_before, due):
    reading = maintenance.Reading(maintenance.SCHEDULED, (maintenance.Window("system-reboot", "e-1", START, END),))
    found = maintenance.due(reading, START - minutes_before * 60, lead_seconds=1800)
    assert [w.event_id for w in found] == (["e-1"] if due else [])


def test_nothing_is_due_from_a_reading_that_is_not_scheduled():
    window = maintenance.Window("system-reboot", "e-1", START, END)
    for state in (maintenance.CLEAR, maintenance.UNKNOWN, maintenance.NOT_READ):
        assert maintenance.due(maintenance.Reading(state, (window,)), START, 1800) == []


def test_a_reading_that_raises_is_unknown_and_the_source_keeps_going():
    def broken(argv, timeout):
        raise RuntimeError("a bug in the reader")

    source = maintenance.ApiSource("aliyun", ["stop.py"], interval=300, timeout=90, runner=broken)
    source.reading(0)
    source.wait(10)
    reading = source.reading(1)
    assert reading.state == maintenance.UNKNOWN and "RuntimeError: a bug in the reader" in reading.detail
