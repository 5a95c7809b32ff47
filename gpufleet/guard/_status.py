"""One node's guard, as its metrics file says (docs/guard.md, "Metrics"):
one model, read from the text node_exporter serves. A value the daemon
wrote as NaN, or did not write, is None here and "unknown" when shown."""

from __future__ import annotations

import dataclasses
import math
import re

# The states of a node's row, before any value is read.
REPORTING, NO_GUARD, UNREACHABLE, UNREADABLE = "reporting", "no guard", "unreachable", "unreadable"
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$')
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclasses.dataclass(frozen=True)
class NodeGuard:
    host: str
    state: str
    detail: str = ""
    cloud: str | None = None
    spot: str | None = None
    spot_deadline: float | None = None
    # The cloud's scheduled maintenance: the reading's state, and the
    # first window (its code and start) when one is scheduled.
    maintenance: str | None = None
    maintenance_code: str | None = None
    maintenance_start: float | None = None
    idle_seconds: float | None = None
    idle_window_seconds: float | None = None
    idle_armed: bool | None = None
    budget: str | None = None
    spend: float | None = None
    spend_cap: float | None = None
    job_spend: float | None = None
    job_spend_cap: float | None = None
    # The daemon writes a cap of NaN where none is set: that is "no cap",
    # not unknown. None here: no cap series at all (unknown).
    capped: bool | None = None
    # Likewise the price: False is "no price known" (NaN), None a daemon
    # that does not say.
    priced: bool | None = None
    last_event: str | None = None
    last_action: str | None = None
    last_event_at: float | None = None
    checkpoint_landed: bool | None = None
    # Whether the last event's stop or poweroff went through; None for
    # none, pending, or a daemon that does not say.
    final_action_ok: bool | None = None
    last_poll_at: float | None = None
    # The repair ladder: None where repair is off (or a daemon that does
    # not say); else each repair shown (fault, class, rung, state).
    repairs: tuple[tuple[str, str, str, str], ...] | None = None
    # The guard's own account of each repair shown: why it is where it is,
    # and its steps (None: no repairs file, or one that does not read).
    repair_history: tuple[dict, ...] | None = None


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float | None]]]:
    """{metric name: [(labels, value)]}; NaN is None. Raises ValueError on a
    line that is not a sample or a comment."""
    samples: dict[str, list[tuple[dict[str, str], float | None]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError(f"line {number} is not a metric sample: {line[:120]!r}")
        labels = {m["key"]: m["value"].replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for m in _LABEL.finditer(match["labels"] or "")}
        value = float(match["value"])
        samples.setdefault(match["name"], []).append((labels, None if math.isnan(value) else value))
    return samples


def _one(samples, name, **labels):
    for got, value in samples.get(name, []):
        if all(got.get(k) == v for k, v in labels.items()):
            return value
    return None


def _current(samples, name) -> tuple[dict[str, str], str | None]:
    """The state series set to 1 (``state`` label), with its labels."""
    for labels, value in samples.get(name, []):
        if value == 1:
            return labels, labels.get("state")
    return {}, None


def _capped(samples) -> bool | None:
    for labels, value in samples.get("gpufleet_guard_spend_cap", []):
        if labels.get("scope") == "node":
            return value is not None
    return None


def _priced(samples) -> bool | None:
    for _labels, value in samples.get("gpufleet_guard_price_per_hour", []):
        return value is not None
    return None


def from_metrics(host: str, text: str) -> NodeGuard:
    try:
        samples = parse(text)
    except ValueError as error:
        return NodeGuard(host, UNREADABLE, f"the guard's metrics do not parse: {error}")
    if "gpufleet_guard_last_poll_timestamp_seconds" not in samples:
        return NodeGuard(host, UNREADABLE, "the metrics file has no last poll")
    spot_labels, spot = _current(samples, "gpufleet_guard_spot_state")
    _labels, planned = _current(samples, "gpufleet_guard_maintenance_state")
    windows = sorted((value, labels.get("code")) for labels, value in
                     samples.get("gpufleet_guard_maintenance_window_start_timestamp_seconds", []) if value is not None)
    _labels, budget = _current(samples, "gpufleet_guard_budget_state")
    event = (samples.get("gpufleet_guard_last_event_timestamp_seconds") or [({}, None)])[0]
    landed = _one(samples, "gpufleet_guard_checkpoint_landed")
    final_ok = _one(samples, "gpufleet_guard_final_action_ok")
    armed = _one(samples, "gpufleet_guard_idle_armed")
    return NodeGuard(
        host, REPORTING,
        cloud=spot_labels.get("cloud"), spot=spot,
        spot_deadline=_one(samples, "gpufleet_guard_spot_deadline_timestamp_seconds"),
        maintenance=planned,
        maintenance_code=windows[0][1] if windows else None,
        maintenance_start=windows[0][0] if windows else None,
        idle_seconds=_one(samples, "gpufleet_guard_idle_seconds"),
        idle_window_seconds=_one(samples, "gpufleet_guard_idle_window_seconds"),
        idle_armed=None if armed is None else bool(armed),
        budget=budget,
        spend=_one(samples, "gpufleet_guard_spend", scope="node"),
        spend_cap=_one(samples, "gpufleet_guard_spend_cap", scope="node"),
        job_spend=_one(samples, "gpufleet_guard_spend", scope="job"),
        job_spend_cap=_one(samples, "gpufleet_guard_spend_cap", scope="job"),
        capped=_capped(samples),
        priced=_priced(samples),
        last_event=event[0].get("reason"), last_action=event[0].get("action"), last_event_at=event[1],
        checkpoint_landed=None if landed is None else bool(landed),
        final_action_ok=None if final_ok is None else bool(final_ok),
        last_poll_at=_one(samples, "gpufleet_guard_last_poll_timestamp_seconds"),
        repairs=_repairs(samples),
    )


def _repairs(samples) -> tuple[tuple[str, str, str, str], ...] | None:
    if "gpufleet_guard_repair_report_readable" not in samples:
        return None
    return tuple(sorted((labels.get("fault", ""), labels.get("class", ""), labels.get("rung", ""),
                         labels.get("state", "")) for labels, value in samples.get("gpufleet_guard_repair_state", [])
                        if value == 1))


def with_repairs(node: NodeGuard, text: str) -> NodeGuard:
    """The node with the guard's repairs file read into it; a file that
    does not read leaves the history unknown."""
    # The collection's one reader of the file (the drift report's node view
    # reads it too), loaded here: `gpufleet lab` needs no collection.
    from ..drift._schema import node_doctor  # pylint: disable=import-outside-toplevel

    try:
        history = node_doctor.load_repairs(text)
    except ValueError:
        return node
    return dataclasses.replace(node, repair_history=tuple(history))
