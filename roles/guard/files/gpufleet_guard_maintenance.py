# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A cloud's scheduled maintenance of the instance (a reboot, a stop, a
retirement), read from its instance metadata service by the guard daemon
(gpufleet_guard.py) every poll. The daemon makes each scheduled event one
event of its pipeline once the window is near: the job checkpoints before
the cloud's window starts; the final action is the cloud's own.

A reading is one of:

- ``scheduled``: at least one event the cloud has scheduled and not
  completed or cancelled; each with its code, id and window;
- ``clear``: the service answered that nothing is scheduled;
- ``unknown``: anything else (see gpufleet_guard_notice: a failure of the
  service, a body that does not parse): never a trigger, never "clear".
  One event this code cannot read (a field missing, a code or a state it
  does not know) is a problem of the reading, named there; it hides
  neither the others nor a "scheduled", and with no other event it makes
  the reading unknown, not clear;
- ``not_read``: the cloud's events are not read here, and why (the
  cloud's API needs this instance's id, region and credentials).

The source is the cloud's documented one (docs/guard.md, "Maintenance
events", cites each):

- AWS: /latest/meta-data/events/maintenance/scheduled (IMDSv2), a JSON
  list of {Code, Description, EventId, NotBefore, NotAfter, State}, times
  like "21 Jan 2019 09:00:43 GMT"; [] or a 404 when nothing is scheduled.
  Codes: instance-reboot, system-reboot, system-maintenance,
  instance-retirement, instance-stop (EC2's InstanceStatusEvent).
- Alibaba, Tencent and Huawei document theirs through the API only, which
  the instance program (gpufleet_guard_stop.py CONFIG events) calls with
  the cloud's SDK, in the background, every few minutes (ApiSource): ECS
  DescribeInstanceHistoryEvents (InstanceEventCycleStatus Scheduled,
  Executing, Inquiring), CVM DescribeTaskInfo (the repair tasks: TaskStatus
  1 pending authorization, 2 in progress, 4 scheduled) and ECS
  ListScheduledEvents (state inquiring, scheduled, executing). It prints
  each event as the SDK returns it; this module reads them.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import threading
import time

import gpufleet_guard_notice as notice
import gpufleet_process as process

SCHEDULED, CLEAR, UNKNOWN, NOT_READ = "scheduled", "clear", "unknown", "not_read"
STATES = (SCHEDULED, CLEAR, UNKNOWN, NOT_READ)
AWS_PATH = "/latest/meta-data/events/maintenance/scheduled"
AWS_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop")
# An event the cloud has done or dropped; "cancelled" is how older answers spelt it.
AWS_ENDED = ("completed", "canceled", "cancelled")
AWS_STATES = ("active",) + AWS_ENDED
# The clouds whose events are read through their API (ApiSource).
API_CLOUDS = ("aliyun", "tencent", "huawei")
# ECS's instance system events (DescribeInstanceHistoryEvents, EventType):
# those the cloud carries out on the instance, and those its account's
# state causes.
ALIYUN_CODES = (
    "SystemMaintenance.Reboot", "SystemMaintenance.Redeploy", "SystemMaintenance.Stop",
    "SystemMaintenance.RebootAndIsolateErrorDisk", "SystemMaintenance.RebootAndReInitErrorDisk",
    "SystemMaintenance.IsolateErrorDisk", "SystemMaintenance.ReInitErrorDisk",
    "SystemFailure.Reboot", "SystemFailure.Redeploy", "SystemFailure.Stop", "SystemFailure.Delete",
    "InstanceFailure.Reboot", "InstanceExpiration.Stop", "InstanceExpiration.Delete",
    "AccountUnbalanced.Stop", "AccountUnbalanced.Delete")
ALIYUN_ACTIVE = ("Scheduled", "Executing", "Inquiring")
ALIYUN_ENDED = ("Executed", "Avoided", "Canceled", "Failed")
# CVM's repair tasks (DescribeTaskInfo): TaskTypeId 101 to 107 (a hidden
# danger, an abnormal instance, disk, network, running and disk warnings,
# maintenance and upgrade); TaskStatus 1 pending authorization, 2 in
# progress, 4 scheduled; 3 ended, 5 cancelled, 6 avoided.
TENCENT_TYPES = (101, 102, 103, 104, 105, 106, 107)
TENCENT_ACTIVE = (1, 2, 4)
TENCENT_ENDED = (3, 5, 6)
TENCENT_SCHEDULED = 4
# ECS's scheduled events (ListScheduledEvents): type and state.
HUAWEI_TYPES = ("instance-reboot", "instance-stop", "instance-migrate", "instance-redeploy",
                "localdisk-recovery", "system-maintenance")
HUAWEI_ACTIVE = ("inquiring", "scheduled", "executing")
HUAWEI_ENDED = ("completed", "failed", "canceled")


@dataclasses.dataclass(frozen=True)
class Window:
    code: str
    event_id: str
    not_before: float  # seconds since the epoch
    not_after: float | None
    description: str = ""


@dataclasses.dataclass(frozen=True)
class Reading:
    state: str
    windows: tuple[Window, ...] = ()
    detail: str = ""
    problems: tuple[str, ...] = ()  # the events that could not be read, each why


def _aws_time(text) -> float:
    if not isinstance(text, str):
        raise ValueError(f"a time that is not text: {text!r}")
    parsed = datetime.datetime.strptime(text.strip(), "%d %b %Y %H:%M:%S GMT")
    return parsed.replace(tzinfo=datetime.timezone.utc).timestamp()


def _aws_window(event) -> Window | None:
    """One event of the list; None when it has ended."""
    if not isinstance(event, dict) or not all(isinstance(event.get(k), str) for k in ("Code", "EventId", "State")):
        raise ValueError(f"an event lacks its Code, EventId or State: {json.dumps(event)[:200]}")
    if event["State"] not in AWS_STATES:
        raise ValueError(f"event {event['EventId']}: a State this guard does not know: {event['State']!r}")
    if event["State"] in AWS_ENDED:
        return None
    if event["Code"] not in AWS_CODES:
        raise ValueError(f"event {event['EventId']}: a Code this guard does not know: {event['Code']!r}")
    not_after = event.get("NotAfter")
    try:
        return Window(event["Code"], event["EventId"], _aws_time(event.get("NotBefore")),
                      None if not_after in (None, "") else _aws_time(not_after), str(event.get("Description", "")))
    except ValueError as error:
        raise ValueError(f"event {event['EventId']}: {error}") from None


def _aws_reading(body: str) -> Reading:
    try:
        events = json.loads(body)
    except json.JSONDecodeError as error:
        raise ValueError(f"the scheduled events are not JSON ({error}): {body[:200]!r}") from None
    if not isinstance(events, list):
        raise ValueError(f"the scheduled events are not a list: {body[:200]!r}")
    reading = _windows(events, _aws_window)
    return dataclasses.replace(reading, detail=body.strip()[:1000] if events else "")


def _iso_time(text, zone: datetime.tzinfo = datetime.timezone.utc) -> float:
    """An ISO 8601 time; one written without its zone is in ``zone``: UTC,
    as ECS and Huawei's ECS write theirs ("2017-11-30T06:32:31Z"), or
    UTC+8, as CVM writes "2023-05-01 10:10:10", like its spot notice."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a time that is not text: {text!r}")
    parsed = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)).timestamp()


def _said(state: str, text) -> str:
    return f"{state}: {text}" if isinstance(text, str) and text.strip() else state


def _name(value) -> str | None:
    # ECS gives EventType and EventCycleStatus as {"Code": n, "Name": "..."}.
    return value.get("Name") if isinstance(value, dict) and isinstance(value.get("Name"), str) else None


def _object(event) -> dict:
    if not isinstance(event, dict):
        raise ValueError(f"an event that is not an object: {json.dumps(event)[:200]}")
    return event


def _aliyun_window(event: dict) -> Window | None:
    event = _object(event)
    ident, code, state = event.get("EventId"), _name(event.get("EventType")), _name(event.get("EventCycleStatus"))
    if not isinstance(ident, str) or code is None or state is None:
        raise ValueError(f"an event lacks its EventId, EventType.Name or EventCycleStatus.Name: "
                         f"{json.dumps(event)[:200]}")
    if state in ALIYUN_ENDED:
        return None
    if state not in ALIYUN_ACTIVE:
        raise ValueError(f"event {ident}: an EventCycleStatus this guard does not know: {state!r}")
    if code not in ALIYUN_CODES:
        raise ValueError(f"event {ident}: an EventType this guard does not know: {code!r}")
    try:
        start = _iso_time(event.get("NotBefore"))
    except ValueError as error:
        raise ValueError(f"event {ident}: NotBefore: {error}") from None
    return Window(code, ident, start, None, _said(state, event.get("Reason")))


def _tencent_window(event: dict) -> Window | None:
    event = _object(event)
    ident, kind, state = event.get("TaskId"), event.get("TaskTypeId"), event.get("TaskStatus")
    if not isinstance(ident, str) or not isinstance(kind, int) or not isinstance(state, int):
        raise ValueError(f"a repair task lacks its TaskId, TaskTypeId or TaskStatus: {json.dumps(event)[:200]}")
    if state in TENCENT_ENDED:
        return None
    if state not in TENCENT_ACTIVE:
        raise ValueError(f"repair task {ident}: a TaskStatus this guard does not know: {state!r}")
    if kind not in TENCENT_TYPES:
        raise ValueError(f"repair task {ident}: a TaskTypeId this guard does not know: {kind!r}")
    # A task pending authorization, or in progress, can be carried out from
    # now on: its window opened when the cloud created it. A scheduled one
    # starts at the time it was authorized for.
    field = "AuthTime" if state == TENCENT_SCHEDULED and event.get("AuthTime") else "CreateTime"
    try:
        start = _iso_time(event.get(field), notice.TENCENT_ZONE)
    except ValueError as error:
        raise ValueError(f"repair task {ident}: {field}: {error}") from None
    name = event.get("TaskTypeName") or f"type {kind}"
    return Window(f"repair-task-{kind}", ident, start, None, f"{name}, status {state}")


def _huawei_window(event: dict) -> Window | None:
    event = _object(event)
    ident, kind, state = event.get("id"), event.get("type"), event.get("state")
    if not all(isinstance(v, str) for v in (ident, kind, state)):
        raise ValueError(f"an event lacks its id, type or state: {json.dumps(event)[:200]}")
    if state in HUAWEI_ENDED:
        return None
    if state not in HUAWEI_ACTIVE:
        raise ValueError(f"event {ident}: a state this guard does not know: {state!r}")
    if kind not in HUAWEI_TYPES:
        raise ValueError(f"event {ident}: a type this guard does not know: {kind!r}")
    # One pending authorization may have no start yet: the latest the
    # cloud lets it be put off to; one executing has started.
    field = next((f for f in ("not_before", "not_before_deadline", "start_time") if event.get(f)), "not_before")
    try:
        start = _iso_time(event.get(field))
        end = _iso_time(event["not_after"]) if event.get("not_after") else None
    except ValueError as error:
        raise ValueError(f"event {ident}: {error}") from None
    return Window(kind, ident, start, end, _said(state, event.get("description")))


API_WINDOWS = {"aliyun": _aliyun_window, "tencent": _tencent_window, "huawei": _huawei_window}


def _windows(events: list, window) -> Reading:
    """The reading of a list of events, each read by ``window(event)``
    (None: ended; ValueError: a problem of that event alone)."""
    windows, problems = [], []
    for event in events:
        try:
            found = window(event)
        except ValueError as error:
            problems.append(str(error))
            continue
        if found is not None:
            windows.append(found)
    windows.sort(key=lambda w: (w.not_before, w.event_id))
    state = SCHEDULED if windows else (UNKNOWN if problems else CLEAR)
    return Reading(state, tuple(windows), "", tuple(problems))


def api_reading(cloud: str, rc: int | None, stdout: str, why: str) -> Reading:
    """The reading of one run of the instance program's ``events``: its
    exit status, its output, and why it failed where it did."""
    if rc is None:
        return Reading(UNKNOWN, detail=f"the events call did not finish: {why}")
    try:
        report = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    if not isinstance(report, dict):
        return Reading(UNKNOWN, detail=f"the events call exited {rc} without its report: {why[:300]}")
    if rc != 0 or report.get("outcome") != "read":
        return Reading(UNKNOWN, detail=f"the events call exited {rc}: {report.get('outcome')}: "
                                       f"{str(report.get('detail', ''))[:300]}")
    events = report.get("events")
    if not isinstance(events, list):
        return Reading(UNKNOWN, detail="the events call's report has no list of events")
    return _windows(events, API_WINDOWS[cloud])


class ApiSource:
    """The instance program's ``events`` call, run in the background every
    ``interval`` seconds (after a failed one, every ``retry`` seconds at
    most) so that a slow API never holds up a poll: a spot notice gives two
    minutes. ``reading(now)`` is the last answer; before the first one it
    is unknown, never clear."""

    def __init__(self, cloud: str, argv, interval: float, timeout: float, runner=None, retry: float = 60):
        self.cloud, self.argv, self.interval, self.timeout = cloud, tuple(argv), interval, timeout
        self.retry = min(retry, interval)
        self.runner = runner or process.run
        self.last = Reading(UNKNOWN, detail="the first reading of the cloud's events is under way")
        self.started_at = None
        self._thread = None
        self._lock = threading.Lock()

    def _run(self) -> None:
        try:
            done = self.runner(list(self.argv) + ["events"], self.timeout)
            reading = api_reading(self.cloud, done.rc, done.stdout, done.why or done.stderr)
        except Exception as error:  # pylint: disable=broad-exception-caught  # a thread must not die silently
            reading = Reading(UNKNOWN, detail=f"the events call could not be read: {type(error).__name__}: {error}")
        with self._lock:
            self.last = reading

    def reading(self, now: float) -> Reading:
        with self._lock:
            last = self.last
        busy = self._thread is not None and self._thread.is_alive()
        every = self.retry if last.state == UNKNOWN else self.interval
        if not busy and (self.started_at is None or now - self.started_at >= every):
            self.started_at = now
            self._thread = threading.Thread(target=self._run, name="maintenance-events", daemon=True)
            self._thread.start()
        return last

    def wait(self, timeout: float | None = None) -> None:
        """Until the call under way (if any) has answered: for tests."""
        if self._thread is not None:
            self._thread.join(timeout)


def read(source, cloud: str, now: float | None = None) -> Reading:
    """The maintenance the cloud has scheduled: through ``source``, the
    cloud's metadata reader (AWS; it keeps its session token) or its
    ApiSource (Alibaba, Tencent, Huawei); a string says why the cloud's
    events are not read. Never raises."""
    if isinstance(source, str) or source is None:
        return Reading(NOT_READ, detail=source or f"no maintenance source for the cloud {cloud!r}")
    if isinstance(source, ApiSource):
        return source.reading(time.time() if now is None else now)
    if cloud != "aws":
        return Reading(NOT_READ, detail=f"no maintenance source in the metadata of the cloud {cloud!r}")

    def aws() -> Reading:
        body = source._get(AWS_PATH)  # pylint: disable=protected-access  # the reader's token-aware read
        return Reading(CLEAR) if body is None else _aws_reading(body)

    return notice.guarded(aws, lambda why: Reading(UNKNOWN, detail=why))


def due(reading: Reading, now: float, lead_seconds: float) -> list[Window]:
    """The scheduled windows that start within `lead_seconds` (or have
    started): the job checkpoints before each of these."""
    return [w for w in reading.windows if w.not_before - lead_seconds <= now] if reading.state == SCHEDULED else []
