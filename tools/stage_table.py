"""Print `make test`'s closing table, one row per stage: passed or failed,
and seconds; exit 1 if any stage failed or never reported.

Usage: stage_table.py TIMES_LOG STAGE [STAGE ...]

TIMES_LOG holds the lines the Makefile's `timed` helper appends, one per
stage run: `<stage> <seconds>s rc=<code>`. A stage named on the command line
with no line in the log failed before it could start (a prerequisite
failed), and is reported as such, never left out.

A STAGE of the form `a+b` is a group whose stages ran side by side: each
gets its row, then the group a row of its own with the wall time the
`stages` loop logged for it (passed only if all its stages passed). The
total is the sum of what ran one after another: the groups' wall times,
never the overlapping stages added up."""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINE = re.compile(r"^(?P<stage>\S+) (?P<seconds>\d+)s rc=(?P<rc>\d+)$")


def read(log: Path) -> dict[str, tuple[int, int]]:
    """Stage -> (seconds, exit code); the last run of a stage counts."""
    runs = {}
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if match:
            runs[match["stage"]] = (int(match["seconds"]), int(match["rc"]))
    return runs


def _row(stage: str, runs: dict[str, tuple[int, int]]) -> tuple[tuple[str, str, str], int | None, bool]:
    """One stage's row, its seconds (None if it never reported) and whether it passed."""
    if stage not in runs:
        return (stage, "failed (did not start)", "-"), None, False
    seconds, rc = runs[stage]
    return (stage, "passed" if rc == 0 else f"failed (exit {rc})", str(seconds)), seconds, rc == 0


def table(stages: list[str], runs: dict[str, tuple[int, int]]) -> tuple[str, bool]:
    """The table's text, and whether every stage passed."""
    rows = [("stage", "result", "seconds")]
    ok = True
    total = 0
    for entry in stages:
        members = entry.split("+")
        if len(members) == 1:
            row, seconds, passed = _row(entry, runs)
            rows.append(row)
        else:
            passed = True
            for member in members:
                row, _seconds, member_ok = _row(member, runs)
                rows.append(row)
                passed = passed and member_ok
            seconds = runs[entry][0] if entry in runs else None
            rows.append((entry, ("passed" if passed else "failed") + " (side by side)",
                         "-" if seconds is None else str(seconds)))
        total += seconds or 0
        ok = ok and passed
    rows.append(("total", "passed" if ok else "failed", str(total)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:>{widths[2]}}" for a, b, c in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines), ok


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(next(line for line in __doc__.splitlines() if line.startswith("Usage")), file=sys.stderr)
        return 2
    text, ok = table(argv[1:], read(Path(argv[0])))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
