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
- ``not_read``: the cloud's events are not read here (docs/guard.md says
  why, per cloud).

The source is the cloud's documented one:

- AWS: /latest/meta-data/events/maintenance/scheduled (IMDSv2), a JSON
  list of {Code, Description, EventId, NotBefore, NotAfter, State}, times
  like "21 Jan 2019 09:00:43 GMT"; [] or a 404 when nothing is scheduled.
  Codes: instance-reboot, system-reboot, system-maintenance,
  instance-retirement, instance-stop (EC2's InstanceStatusEvent).
"""

from __future__ import annotations

import dataclasses
import datetime
import json

import gpufleet_guard_notice as notice

SCHEDULED, CLEAR, UNKNOWN, NOT_READ = "scheduled", "clear", "unknown", "not_read"
STATES = (SCHEDULED, CLEAR, UNKNOWN, NOT_READ)
AWS_PATH = "/latest/meta-data/events/maintenance/scheduled"
AWS_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop")
# An event the cloud has done or dropped; "cancelled" is how older answers spelt it.
AWS_ENDED = ("completed", "canceled", "cancelled")
AWS_STATES = ("active",) + AWS_ENDED
# Why a cloud's events are not read here (docs/guard.md, "Maintenance events").
NOT_READ_WHY = {
    "aliyun": "Alibaba Cloud's system events (SystemMaintenance.*) are not read by this guard yet",
    "tencent": "Tencent Cloud documents its maintenance tasks through the API only (DescribeTaskInfo), "
               "which this guard does not call yet",
    "huawei": "Huawei Cloud documents its scheduled events through the API only (ListScheduledEvents), "
              "which this guard does not call yet",
}


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
    windows, problems = [], []
    for event in events:
        try:
            window = _aws_window(event)
        except ValueError as error:
            problems.append(str(error))
            continue
        if window is not None:
            windows.append(window)
    windows.sort(key=lambda w: (w.not_before, w.event_id))
    state = SCHEDULED if windows else (UNKNOWN if problems else CLEAR)
    return Reading(state, tuple(windows), body.strip()[:1000] if events else "", tuple(problems))


def read(reader: notice.Reader | None, cloud: str) -> Reading:
    """The maintenance the cloud has scheduled, through `reader` (the
    cloud's metadata reader, which keeps its session token). Never raises."""
    if cloud != "aws" or reader is None:
        return Reading(NOT_READ, detail=NOT_READ_WHY.get(cloud, f"no maintenance source for the cloud {cloud!r}"))

    def aws() -> Reading:
        body = reader._get(AWS_PATH)  # pylint: disable=protected-access  # the reader's token-aware read
        return Reading(CLEAR) if body is None else _aws_reading(body)

    return notice.guarded(aws, lambda why: Reading(UNKNOWN, detail=why))


def due(reading: Reading, now: float, lead_seconds: float) -> list[Window]:
    """The scheduled windows that start within `lead_seconds` (or have
    started): the job checkpoints before each of these."""
    return [w for w in reading.windows if w.not_before - lead_seconds <= now] if reading.state == SCHEDULED else []
