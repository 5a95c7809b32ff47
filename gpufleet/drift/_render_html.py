"""A self-contained HTML page: fleet summary, a hosts x roles grid, grouping
by cloud, region and GPU model, the most drifted resources, peer mismatches,
and a section per host with each resource's diff. No external assets, so it
can be mailed or archived.

Python prepares plain data (rows, cells, diff lines) here; the markup is
templates/report.html.j2. The template's environment has StrictUndefined, so
every value it reads is supplied below, "unknown" included, and a field
renamed on one side fails the render instead of vanishing from the page."""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import functools
import hashlib
import re
from collections import defaultdict
from pathlib import Path

import jinja2

from . import _doctor
from ._model import Report

UNKNOWN = "unknown"
# Records without a role come from the play itself (Gathering Facts).
PLAY_COLUMN = "(play)"

# A grid cell shows the worst of its records. Waived drift is accepted, so
# it ranks below a resource nobody could verify, and above in sync: it is
# still a difference on the node. "none" (no records) is not "in sync".
CELL_RANK = ("none", "in-sync", "waived", "could-not-verify", "drifted", "failed", "unreachable")
# A letter per state, so the grid reads without colour (and in print).
GLYPH = {"none": "\u00b7", "in-sync": "\u2713", "waived": "W", "could-not-verify": "?", "drifted": "D",
         "failed": "F", "unreachable": "U"}
LABEL = {"none": "no records", "in-sync": "in sync", "waived": "waived drift", "could-not-verify": "could not verify",
         "drifted": "drifted", "failed": "failed", "unreachable": "unreachable"}
# The per-host list puts the worst first.
RECORD_RANK = {"unreachable": 0, "failed": 1, "drifted": 2, "could-not-verify": 3, "in-sync": 4}

_TEMPLATES = Path(__file__).with_name("templates")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _text(value) -> str:
    return UNKNOWN if value is None or value == "" else str(value)


def _short_role(role) -> str:
    return str(role).rsplit(".", 1)[-1] if role else PLAY_COLUMN


def _natural(name: str):
    """node-2 before node-10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


@dataclasses.dataclass
class _Page(Report):
    """The report as the page reads it. Hosts' states are the model's,
    computed once: the page asks for each host several times."""

    def __post_init__(self):
        by_host: dict[str, list[dict]] = defaultdict(list)
        for r in self.records:
            by_host[r["host"]].append(r)
        self.by_host = dict(by_host)
        self._states = Report(hosts={}, records=self.records).host_states(by_host)

    def host_state(self, host: str) -> str:
        return self._states.get(host, "no-resources")


def _page(report) -> _Page:
    """A copy with the fields the model indexes filled in: a record without
    its host or resource, or a host without metadata, still shows, as
    unknown, instead of failing the whole page."""
    # A copy only of a record that lacks its host or resource: a fleet's
    # million records are not copied for the page.
    records = [r if isinstance(r.get("host"), str) and r["host"] and isinstance(r.get("resource"), str)
               and r["resource"] else {**r, "host": _text(r.get("host")), "resource": _text(r.get("resource"))}
               for r in report.records]
    hosts = {str(h): {k: v for k, v in (meta or {}).items() if v is not None} for h, meta in report.hosts.items()}
    for r in records:
        hosts.setdefault(r["host"], {})
    return _Page(hosts=hosts, records=records, started=report.started, finished=report.finished,
                 peers=list(report.peers or []), next_step=report.next_step, source=report.source,
                 unlisted=list(report.unlisted or []))


def _anchors(hosts) -> dict[str, str]:
    """An id per host that is safe in a URL fragment and unique: a name that
    had to be changed gets a hash of the original, so "a b" and "a-b" differ."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for host in hosts:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "-", host)
        anchor = f"host-{safe}" if safe == host else f"host-{safe}-{hashlib.sha1(host.encode()).hexdigest()[:8]}"
        base, n = anchor, 2
        while anchor in taken:
            anchor, n = f"{base}-{n}", n + 1
        taken.add(anchor)
        out[host] = anchor
    return out


def _diff_lines(before, after, before_header, after_header) -> list[dict]:
    lines = difflib.unified_diff(
        [] if before is None else str(before).splitlines(), [] if after is None else str(after).splitlines(),
        "before" if before_header in (None, "") else str(before_header),
        "after" if after_header in (None, "") else str(after_header), lineterm="")
    out = []
    for line in lines:
        if line.startswith(("---", "+++")):
            cls = "hdr"
        elif line.startswith("@@"):
            cls = "hunk"
        else:
            cls = "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        out.append({"cls": cls, "text": line})
    return out


def _diff(record) -> list[dict]:
    """The record's diff as blocks of classed lines; an empty list when it
    has none. A string (the callback's no_log placeholder) is one block."""
    diff = record.get("diff")
    if diff is None or diff == "" or diff == []:
        return []
    if isinstance(diff, (str, bytes, int, float)):
        return [{"lines": [{"cls": "", "text": line} for line in str(diff).splitlines() or [""]]}]
    entries = [diff] if isinstance(diff, dict) else list(diff)
    blocks = []
    for d in entries:
        if not isinstance(d, dict):
            blocks.append({"lines": [{"cls": "", "text": str(d)}]})
        elif "before" in d or "after" in d:
            lines = _diff_lines(d.get("before"), d.get("after"), d.get("before_header"), d.get("after_header"))
            blocks.append({"lines": lines or [{"cls": "", "text": "(before and after are the same text)"}]})
        elif "prepared" in d:
            blocks.append({"lines": [{"cls": "", "text": line} for line in str(d["prepared"]).splitlines() or [""]]})
        else:
            blocks.append({"lines": [{"cls": "", "text": repr(d)}]})
    return blocks


def _record_state(r) -> str:
    return "waived" if r["state"] == "drifted" and r.get("waiver") else r["state"]


def _waiver(waiver) -> dict | None:
    if not waiver:
        return None
    fields = waiver if isinstance(waiver, dict) else {}
    return {"expires": _text(fields.get("expires")), "reason": _text(fields.get("reason"))}


def _record_row(r) -> dict:
    message = r.get("message")
    return {
        "state": r["state"],
        "shown": _record_state(r),
        # --from: a node whose report was not read says why (stale, missing).
        "label": r.get("pull") or (f"{r['state']} (waived)" if _record_state(r) == "waived" else r["state"]),
        "resource": r["resource"],
        "applied_by": [_short_role(name) for name in r.get("applied_by") or []],
        "waiver": _waiver(r.get("waiver")),
        "waiver_expired": _waiver(r.get("waiver_expired")),
        "first_seen": _text(r["first_seen"]) if r.get("first_seen") else None,
        "diff": _diff(r),
        # Failed, unreachable and unverified records say why; one without a
        # message says that it has none rather than leaving a gap.
        "message": str(message) if message not in (None, "") else None,
        "needs_message": r["state"] in ("failed", "unreachable", "could-not-verify"),
        "needs_diff": r["state"] == "drifted",
    }


def _when(value) -> str:
    """A Unix time as UTC ISO text; anything else as it is, or unknown."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).isoformat(timespec="seconds")
        except (OverflowError, OSError, ValueError):
            pass
    return _text(value)


# What a part of the node view that was not read says.
_NOT_READ = {"absent": "not reported", "unreadable": "unreadable"}


def _part(part: dict) -> dict:
    state = part.get("state")
    return {"state": _text(state), "read": state == "read", "label": _NOT_READ.get(state, f"state {_text(state)}"),
            "detail": str(part["detail"]) if part.get("detail") not in (None, "") else None}


def _fault_row(fault: dict) -> dict:
    return {"label": _doctor.fault_label(fault), "tripped": fault.get("tripped") is True,
            "class": _text(fault.get("class")), "step": _text(fault.get("step")),
            "count": _text(fault.get("count")), "threshold": _text(fault.get("threshold")),
            "window": _text(fault.get("window_minutes")), "pci": _text(fault.get("pci")),
            "last": _when(fault.get("last")),
            "detail": str(fault["detail"]) if fault.get("detail") not in (None, "") else None}


def _repair_row(repair: dict) -> dict:
    closed = repair.get("closed_at")
    return {"fault": _text(repair.get("fault")), "class": _text(repair.get("class")),
            "rung": _text(repair.get("rung") or repair.get("first_rung")), "state": _text(repair.get("state")),
            "why": _text(repair.get("why")), "opened": _when(repair.get("opened_at")),
            "closed": None if closed is None else _when(closed), "open": _doctor.is_open(repair)}


def _doctor_view(meta) -> dict | None:
    """A host's node view of GPU faults for its section (None: the report
    has none for it)."""
    doctor = _doctor.of(meta)
    if doctor is None:
        return None
    found, guard = _doctor.health(doctor), _doctor.repairs(doctor)
    return {
        "health": {**_part(found), "status": _text(found.get("status")), "time": _text(found.get("time")),
                   "checks": [{key: _text(c.get(key)) for key in ("check", "result", "detail")}
                              for c in _doctor.checks(doctor)],
                   "faults": [_fault_row(f) for f in _doctor.faults(doctor)]},
        "repairs": {**_part(guard), "written": _when(guard.get("written")),
                    "entries": [_repair_row(r) for r in _doctor.repair_items(doctor)]},
        "acting": _doctor.acting(doctor),
    }


def _grid(page: _Page, hosts: list[str], anchors: dict[str, str]) -> tuple[list[dict], list[dict]]:
    full_names: dict[str, set[str]] = defaultdict(set)
    worst: dict[tuple[str, str], str] = {}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in page.records:
        column = _short_role(r.get("role"))
        full_names[column].add(str(r.get("role") or "records without a role: the play's own tasks"))
        key = (r["host"], column)
        state = _record_state(r)
        counts[key] += 1
        if CELL_RANK.index(state) > CELL_RANK.index(worst.get(key, "none")):
            worst[key] = state
    columns = sorted(full_names, key=lambda c: (c != PLAY_COLUMN, c))
    roles = [{"name": c, "title": ", ".join(sorted(full_names[c]))} for c in columns]
    rows = []
    for host in hosts:
        host_state = page.host_state(host)
        cells = []
        for column in columns:
            state = worst.get((host, column), "none")
            n = counts.get((host, column), 0)
            title = f"{host} \u00b7 {column}: {LABEL[state]} ({n} record{'' if n == 1 else 's'})"
            if host_state == "unreachable":
                # Nothing on an unreachable host was verified to the end of
                # the run: its whole row says so.
                if state != "unreachable":
                    title = f"{host} \u00b7 {column}: unreachable host (recorded before: {LABEL[state]})"
                state = "unreachable"
            cells.append({"role": column, "state": state, "glyph": GLYPH[state], "title": title})
        rows.append({"host": host, "anchor": anchors[host], "state": host_state, "cells": cells})
    return roles, rows


def _grouping(page: _Page, key: str, title: str) -> dict:
    shown = ("in-sync", "drifted", "failed", "unreachable")
    rows = [{"value": value, "counts": [{"state": s, "n": states.get(s, 0)} for s in shown]}
            for value, states in page.grouped(key).items()]
    return {"title": title, "rows": rows}


def context(report) -> dict:
    """What the template renders: plain data, no markup."""
    page = _page(report)
    counts = page.counts()
    hosts = sorted(page.hosts, key=_natural)
    anchors = _anchors(hosts)
    # A host with a failed check and drift is in both lists: the failure
    # hides none of its drift.
    live = set(page.drifted_hosts())
    drifted_hosts = [h for h in hosts if h in live]
    failed_hosts = [h for h in hosts if page.host_state(h) == "failed"]
    roles, rows = _grid(page, hosts, anchors)
    sections = []
    for host in hosts:
        meta = page.hosts.get(host, {})
        records = sorted((r for r in page.by_host.get(host, []) if r["state"] != "in-sync"),
                         key=lambda r: (RECORD_RANK.get(r["state"], 9), r["resource"]))
        doctor = _doctor_view(meta)
        sections.append({
            "host": host, "anchor": anchors[host], "state": page.host_state(host),
            "doctor": doctor, "open": page.host_state(host) != "in-sync" or bool(doctor and doctor["acting"]),
            "provider": _text(meta.get("provider")), "region": _text(meta.get("region")),
            "gpu_model": _text(meta.get("gpu_model")),
            "total": len(page.by_host.get(host, [])), "records": [_record_row(r) for r in records],
        })
    return {
        "started": _text(page.started), "finished": _text(page.finished), "exit_code": page.exit_code(),
        "cards": [
            {"label": "nodes in sync", "value": f"{page.in_sync_percent():.0f}%"},
            {"label": "nodes", "value": len(hosts)},
            {"label": "drifted nodes", "value": len(drifted_hosts)},
            {"label": "drifted resources", "value": counts.get("drifted", 0)},
            {"label": "failed", "value": counts.get("failed", 0)},
            {"label": "unreachable", "value": counts.get("unreachable", 0)},
            {"label": "coverage", "value": f"{page.coverage_percent():.1f}%"},
            *([{"label": "not reported", "value": len(page.not_reported())}] if page.source else []),
        ],
        "not_reported": sorted(page.not_reported().items()),
        "source": page.source,
        "unlisted": [{"host": u["host"], "finished": _text(u.get("finished")), "exit_code": _text(u.get("exit_code")),
                      "error": u.get("error")} for u in page.unlisted],
        "drifted_hosts": drifted_hosts,
        "failed_hosts": failed_hosts,
        "faulted_hosts": sorted(page.faulted_hosts(), key=_natural),
        "legend": [{"state": s, "glyph": GLYPH[s], "label": LABEL[s]} for s in reversed(CELL_RANK)],
        "roles": roles, "rows": rows,
        "most_drifted": [{"resource": r, "nodes": n} for r, n in page.most_drifted()],
        "groupings": [_grouping(page, "provider", "cloud"), _grouping(page, "region", "region"),
                      _grouping(page, "gpu_model", "GPU model")],
        "peers": [{"host": _text(p.get("host")), "message": _text(p.get("message")), "group": _text(p.get("group"))}
                  for p in page.peers],
        "sections": sections,
        "next_step": _text(page.next_step) if page.next_step else None,
    }


def html(report) -> str:
    return _environment().get_template("report.html.j2").render(context(report))
