# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node view of GPU faults: what node_health last found on a node and
what the guard's repair ladder is doing there, read from the two files the
roles write (docs/drift.md, "GPU faults in the node view").

gpufleet.cloud.node_facts reads the files and keeps this as
ansible_facts.gpufleet_node.doctor; the drift callback copies it into the
report's host metadata. `gpufleet guard status` reads the repairs file with
load_repairs too. Controller-only, standard library only.

A file that is not there is "absent": node_health, or the guard's repair,
is not on that node, which says nothing of its health. A file that cannot
be read, or does not hold what its writer writes, is "unreadable", with why.
"""

from __future__ import annotations

import json

# Where the roles write them: node_health's node_health_report_dir and the
# guard's __guard_repairs_path (roles/guard/vars/main.yml).
HEALTH_REPORT = "/var/lib/gpufleet/health/report.json"
REPAIRS = "/run/gpufleet-guard/repairs.json"
READ, ABSENT, UNREADABLE = "read", "absent", "unreadable"

# The guard shows a repair closed within a day (gpufleet_guard.py,
# REPAIR_SHOWN_SECONDS); a file the guard stopped writing keeps older ones.
SHOWN_SECONDS = 86400
# Each text kept is cut to this: the report holds a fleet of nodes.
DETAIL_CHARS = 300
FAULT_FIELDS = ("kind", "code", "pci", "class", "step", "threshold", "window_minutes", "count", "undated", "last",
                "tripped", "detail")
REPAIR_FIELDS = ("fault", "class", "rung", "first_rung", "state", "why", "opened_at", "closed_at")


def _cut(value):
    return value[:DETAIL_CHARS] if isinstance(value, str) else value


def _plain(value):
    """A scalar as JSON keeps it; anything else as its text."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else _cut(str(value))


def _object(text, what):
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError("%s is not JSON (%s)" % (what, error)) from None
    if not isinstance(data, dict):
        raise ValueError("%s is not a JSON object" % what)
    return data


def load_repairs(text):
    """The repairs of the guard's repairs file, each as written (a dict);
    ValueError naming what is wrong where the text is not that file's."""
    return _repair_list(_object(text, "the repairs file"))


def _repair_list(data):
    found = data.get("repairs")
    if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
        raise ValueError("the repairs file's 'repairs' is not a list of objects")
    return found


def health(text):
    """node_health's report as the node view keeps it: its time and status,
    the checks that did not pass, and the faults that tripped or are
    unknown (seen, never tripped). A fault entry without some fields keeps
    them as None, and one without its class is unknown."""
    data = _object(text, "the health report")
    checks, faults = data.get("checks", []), data.get("faults", [])
    for key, value in (("checks", checks), ("faults", faults)):
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise ValueError("the health report's %r is not a list of objects" % key)
    kept = []
    for fault in faults:
        entry = {key: _cut(_plain(fault.get(key))) for key in FAULT_FIELDS}
        entry["class"] = entry["class"] or "unknown"
        entry["tripped"] = entry["tripped"] is True
        if entry["tripped"] or entry["class"] == "unknown":
            kept.append(entry)
    return {
        "time": _plain(data.get("time")),
        "status": _plain(data.get("status")) or "unknown",
        "checks": [{key: _cut(_plain(check.get(key))) for key in ("check", "result", "detail")}
                   for check in checks if check.get("result") not in ("pass", "skip")],
        "faults": kept,
    }


def repairs(text, now):
    """The guard's repairs as the node view keeps them: the open ones and
    those closed within a day of `now` (the node's clock)."""
    data = _object(text, "the repairs file")
    items = []
    for repair in _repair_list(data):
        closed = repair.get("closed_at")
        if isinstance(closed, (int, float)) and now is not None and now - closed >= SHOWN_SECONDS:
            continue
        items.append({key: _cut(_plain(repair.get(key))) for key in REPAIR_FIELDS})
    return {"written": _plain(data.get("written")), "items": items}


def _one(read, parse):
    """{state, ...}: `read` is (state, text or why) as the node gave it."""
    state, body = read
    if state != READ:
        return {"state": state, "detail": _cut(str(body or ""))}
    try:
        return {"state": READ, **parse(body)}
    except ValueError as error:
        return {"state": UNREADABLE, "detail": _cut(str(error))}


def doctor(health_read, repairs_read, now=None):
    """The node view of GPU faults from the two files, each given as
    (state, text) where the node gave its text, or (absent or unreadable,
    why). Never raises on what a file holds."""
    return {"health": _one(health_read, health), "repairs": _one(repairs_read, lambda text: repairs(text, now))}
