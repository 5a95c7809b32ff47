"""The node view of GPU faults in a drift report (a host's "doctor", which
gpufleet.cloud.node_facts reads from the node: docs/drift.md, "GPU faults in
the node view"), in the words the table and the page share.

Faults are not drift: nothing here touches a record, a host's state or the
exit code. A report is read as it comes (an older collection's, a pull-mode
node's): a field that is missing or of another type reads as unknown and
never fails the table or the page."""

from __future__ import annotations

UNKNOWN = "unknown"
# A repair that waits or holds says why.
WAITS = ("waiting", "held")


def _text(value) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _dicts(value) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def of(meta) -> dict | None:
    """A host's doctor, or None where its report has none (an older
    collection's scan, a host whose facts were never read)."""
    doctor = _dict(meta).get("doctor")
    return doctor if isinstance(doctor, dict) else None


def health(doctor: dict) -> dict:
    return _dict(doctor.get("health"))


def repairs(doctor: dict) -> dict:
    return _dict(doctor.get("repairs"))


def faults(doctor: dict) -> list[dict]:
    return _dicts(health(doctor).get("faults")) if health(doctor).get("state") == "read" else []


def checks(doctor: dict) -> list[dict]:
    """The checks of node_health's report that did not pass."""
    return _dicts(health(doctor).get("checks")) if health(doctor).get("state") == "read" else []


def tripped(doctor: dict) -> list[dict]:
    return [f for f in faults(doctor) if f.get("tripped") is True]


def repair_items(doctor: dict) -> list[dict]:
    return _dicts(repairs(doctor).get("items")) if repairs(doctor).get("state") == "read" else []


def is_open(repair: dict) -> bool:
    """Open until the guard closes it (cleared or exhausted, with a time)."""
    return repair.get("closed_at") is None


def acting(doctor: dict | None) -> bool:
    """A tripped fault or an open repair: the host's section opens."""
    return bool(doctor) and (bool(tripped(doctor)) or any(is_open(r) for r in repair_items(doctor)))


def fault_label(fault: dict) -> str:
    """XID 79 (RESTART_BM) on 0000:3b:00.0 x1."""
    kind, code = fault.get("kind"), fault.get("code")
    name = f"XID {code}" if kind == "xid" and code is not None else \
        _text(kind) + ("" if code in (None, "") else f" {code}")
    where = f" on {fault['pci']}" if fault.get("pci") else ""
    return f"{name} ({_text(fault.get('class'))}){where} x{_text(fault.get('count'))}"


def repair_label(repair: dict) -> str:
    """reboot acting, with why where it waits or holds."""
    label = f"{_text(repair.get('rung') or repair.get('first_rung'))} {_text(repair.get('state'))}"
    return f"{label}: {repair['why']}" if repair.get("state") in WAITS and repair.get("why") else label


def _part(part: dict, name: str) -> str | None:
    """What a part that was not read says (None where it was)."""
    state = part.get("state")
    if state == "read":
        return None
    if state == "absent":
        return f"no {name} on the node"
    return f"{name} unreadable: {_text(part.get('detail'))}"


def line(doctor: dict | None) -> str | None:
    """The table's one line for a host, or None where there is nothing to
    say: health passed, nothing tripped or unknown, no open repair, and no
    file that could not be read. An absent repairs file is repair off."""
    if doctor is None:
        return None
    parts = []
    found = health(doctor)
    missing = _part(found, "node_health report")
    if missing:
        parts.append(missing)
    elif found.get("status") != "pass":
        failed = checks(doctor)
        why = f" ({_text(failed[0].get('check'))}: {_text(failed[0].get('detail'))})" \
            if failed and not faults(doctor) else ""
        parts.append(f"health {_text(found.get('status'))}{why}")
    parts += [fault_label(f) + ("" if f.get("tripped") is True else " (seen, never tripped)") for f in faults(doctor)]
    guard = repairs(doctor)
    if guard.get("state") not in ("read", "absent"):
        parts.append(_part(guard, "guard repairs file"))
    parts += [f"repair {repair_label(r)}" for r in repair_items(doctor) if is_open(r)]
    return ", ".join(parts) or None
