"""History: each drift run appended to a local JSON-lines store, so a report
can say when each drift was first seen."""

from __future__ import annotations

import json
from pathlib import Path


def first_seen(path: Path) -> dict[tuple[str, str], str]:
    """(host, resource) -> when it was first seen drifted in an unbroken run
    of drifted observations up to the latest stored run."""
    seen: dict[tuple[str, str], str] = {}
    if not path.exists():
        return seen
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        run = json.loads(line)
        current = {tuple(k) for k in run["drifted"]}
        # A drift that went away and came back starts again.
        seen = {k: v for k, v in seen.items() if k in current}
        for key in current:
            seen.setdefault(key, run["finished"])
    return seen


def record(path: Path, report) -> dict[tuple[str, str], str]:
    """Append this run and annotate each drifted record with first_seen."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "finished": report.finished,
        "exit_code": report.exit_code(),
        "drifted": sorted([r["host"], r["resource"]] for r in report.drifted(include_waived=True)),
    }
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
    seen = first_seen(path)
    for r in report.drifted(include_waived=True):
        r["first_seen"] = seen.get((r["host"], r["resource"]), report.finished)
    return seen
