"""Terminal table of a drift report."""

from __future__ import annotations

from . import _doctor


def table(report) -> str:
    lines = []
    lines.append(f"{'HOST':<20} {'STATE':<17} {'RESOURCE'}")
    interesting = [r for r in report.records if r["state"] != "in-sync" and not r.get("not_scanned")]
    for r in sorted(interesting, key=lambda r: (r["host"], r["state"], r["resource"])):
        # --from: a node whose report was not read says why (stale, missing).
        state = r.get("pull") or r["state"] + (" (waived)" if r.get("waiver") else "")
        lines.append(f"{r['host']:<20} {state:<17} {r['resource']}")
        if r.get("message") and r["state"] != "drifted":
            lines.append(f"{'':<20} {'':<17} {r['message'].splitlines()[0][:100]}")
    # One line per host, not one per resource: the JSON report lists them.
    not_scanned = report.not_scanned()
    for host, records in sorted(not_scanned.items()):
        why = records[0]["message"].removeprefix("not scanned: ")
        lines.append(f"{host:<20} {'not scanned':<17} {len(records)} resources: {why}")
    if not interesting and not not_scanned:
        lines.append("(every resource on every host is in sync)")
    # The node view of GPU faults: not drift, so after it and in no count.
    for host, meta in sorted(report.hosts.items()):
        faults = _doctor.line(_doctor.of(meta))
        if faults:
            lines.append(f"{host:<20} {'gpu-faults':<17} {faults}")
    for flag in report.peers:
        lines.append(f"{flag['host']:<20} {'peer-mismatch':<17} {flag['message']}")
    for other in report.unlisted:
        seen = other["error"] or f"report finished {other['finished']}, exit {other['exit_code']}"
        lines.append(f"{other['host']:<20} {'not in inventory':<17} {seen}")
    counts = report.counts()
    lines.append("")
    states = "  ".join(f"{s} {counts.get(s, 0)}"
                       for s in ("in-sync", "drifted", "failed", "unreachable", "could-not-verify"))
    lines.append(
        f"hosts {len(report.hosts)}  in sync {report.in_sync_percent():.0f}%  "
        f"coverage {report.coverage_percent():.1f}%  {states}  exit {report.exit_code()}"
    )
    if report.source:
        marks = list(report.not_reported().values())
        counts = "  ".join(f"{mark} {marks.count(mark)}" for mark in ("stale", "missing", "unreadable"))
        lines.append(f"from {report.source}: {counts}  not in the inventory {len(report.unlisted)}")
    if report.next_step:
        lines.append(f"to repair what drifted: {report.next_step}")
    return "\n".join(lines)
