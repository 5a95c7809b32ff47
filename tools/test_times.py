"""Write docs/test-times.md: what each stage, Molecule scenario and test
module of one `make test` cost, and what later work may still add.

Usage: test_times.py --times TIMES_LOG --junit-dir DIR --molecule-times LOG --out FILE STAGE [STAGE ...]

- TIMES_LOG: the stage lines the Makefile's `timed` helper writes
  (tools/stage_table.py reads the same file).
- DIR: one JUnit XML file per pytest stage (`<stage>.xml`), as pytest's
  --junitxml writes it. A test's time there is its setup, call and teardown
  together, so a module-scoped fixture (a node, a fleet) counts in the test
  that first asked for it.
- LOG: one line per Molecule scenario, `<scenario> <seconds>s rc=<code>`
  (tools/molecule-all.sh).
- STAGE: make test's STAGES, as tools/stage_table.py takes them.

Stages that ran side by side overlap: a module's seconds are its own wall
time inside its stage, and the stages' seconds do not add up to the total.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stage_table  # noqa: E402  pylint: disable=wrong-import-position

# The CI budget this file is kept against, and what later issues of this
# round may add to a fresh-clone `bash .ci/run` (seconds).
BUDGET_SECONDS = 1800
ALLOWANCES = (
    ("drift under failure (scan never goes dark, --fix repairs all it can)", 300),
    ("node repair (node doctor)", 300),
    ("pull-mode fleet drift", 240),
)


def module_of(classname: str) -> str:
    """tests.integration.test_drift.TestX -> tests/integration/test_drift.py"""
    parts = []
    for part in classname.split("."):
        if part[:1].isupper():  # a test class: the module ends before it
            break
        parts.append(part)
    return "/".join(parts) + ".py"


def read_junit(path: Path) -> dict[str, dict]:
    """Module -> {seconds, tests, failed, skipped, slowest: (seconds, name)}."""
    modules: dict[str, dict] = defaultdict(lambda: {"seconds": 0.0, "tests": 0, "failed": 0, "skipped": 0,
                                                    "slowest": (0.0, "")})
    for case in ET.parse(path).getroot().iter("testcase"):
        row = modules[module_of(case.get("classname", ""))]
        seconds = float(case.get("time") or 0)
        row["seconds"] += seconds
        row["tests"] += 1
        row["failed"] += any(case.find(tag) is not None for tag in ("failure", "error"))
        row["skipped"] += case.find("skipped") is not None
        row["slowest"] = max(row["slowest"], (seconds, case.get("name", "")))
    return dict(modules)


def render(stages: list[str], times: Path, junit_dir: Path, molecule_times: Path) -> str:
    runs = stage_table.read(times)
    table, _ok = stage_table.table(stages, runs)
    lines = ["# Test times", "",
             "Written by `make test` (`tools/test_times.py`) from its last run: each",
             "stage, Molecule scenario and test module, in seconds. Stages joined by",
             "`+` ran side by side: the group's own row is its wall time, and the",
             "total adds the groups (without `make deps`). See",
             "[testing.md](testing.md) for what each stage runs.", "",
             "## Stages", "", "```", table, "```", ""]
    lines += ["## Budget and allowances", "",
              f"`bash .ci/run` from a fresh clone must stay within {BUDGET_SECONDS} s. What later",
              "issues of this round may add to it:", "", "| work | seconds of CI |", "|---|---:|"]
    lines += [f"| {work} | {seconds} |" for work, seconds in ALLOWANCES]
    lines.append("")

    scenarios = stage_table.read(molecule_times)
    if scenarios:
        lines += ["## Molecule scenarios", "", "| scenario | seconds | result |", "|---|---:|---|"]
        for name, (seconds, rc) in sorted(scenarios.items(), key=lambda item: -item[1][0]):
            lines.append(f"| {name} | {seconds} | {'passed' if rc == 0 else f'failed (exit {rc})'} |")
        lines.append("")

    for xml in sorted(junit_dir.glob("*.xml")) if junit_dir.is_dir() else []:
        modules = read_junit(xml)
        stage_seconds = runs.get(xml.stem, (None, 0))[0]
        lines += [f"## {xml.stem}" + (f" ({stage_seconds} s)" if stage_seconds is not None else ""), "",
                  "| module | tests | seconds | slowest test (s) |", "|---|---:|---:|---|"]
        for module, row in sorted(modules.items(), key=lambda item: -item[1]["seconds"]):
            note = "".join(f", {row[key]} {key}" for key in ("failed", "skipped") if row[key])
            slowest_seconds, slowest = row["slowest"]
            lines.append(f"| `{module}` | {row['tests']}{note} | {row['seconds']:.0f} | "
                         f"`{slowest}` ({slowest_seconds:.0f}) |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--times", type=Path, required=True)
    parser.add_argument("--junit-dir", type=Path, required=True)
    parser.add_argument("--molecule-times", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("stages", nargs="+", metavar="STAGE")
    args = parser.parse_args(argv)
    args.out.write_text(render(args.stages, args.times, args.junit_dir, args.molecule_times) + "\n")
    print(f"test-times: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
