"""README.md, docs/*.md and the Makefile stand on their own: none of them
refers to anything outside this repository. An issue or stop number, a path
on one machine (/work/...), a folder beside the checkout (../shared,
shared/, ../.library) or a script in a home or temporary directory tells a
reader of the repository nothing, so each fails here, naming file and line.

Paths inside the repository are written from its root
(extensions/molecule/shared/converge.yml, not shared/converge.yml), so a
bare shared/ can only be the folder beside the checkout. A user's own
directories (~/.ansible/collections, ~/.cache) are not references: only a
script under a home or temporary directory is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile"]

# What points outside the repository, and what to call it in a failure.
OUTSIDE = (
    ("an issue number", re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)),
    ("a stop number", re.compile(r"\bstop\s+#?\d+", re.IGNORECASE)),
    ("a path on one machine", re.compile(r"/work/")),
    ("a folder beside the checkout", re.compile(r"\.\./(?:shared|\.library)\b|(?<![\w./-])shared/")),
    ("a script outside the repository",
     re.compile(r"(?:~|/home/[^/\s]+|/root|/var/tmp|/tmp)/\S*\.(?:sh|py|bash)\b")),
)


def references_outside(text: str) -> list[tuple[int, str, str]]:
    """Each reference outside the repository in `text`: (line number, what
    it is, the text that matched)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern in OUTSIDE:
            found += [(number, what, match.group(0)) for match in pattern.finditer(line)]
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_no_document_refers_outside_the_repository(path):
    name = path.relative_to(ROOT).as_posix()
    found = references_outside(path.read_text())
    assert not found, "\n".join(
        f"{name}:{number}: {what} ({text!r}): say here what it stands for, or drop it"
        for number, what, text in found)


# The cases' ids are their positions, not their text: docs/test-times.md
# names a module's slowest test by its id, and a sample's text there would
# be the very reference this test forbids.
OUTSIDE_SAMPLES = [
    ("as measured in issue 36", "an issue number"),
    ("see Issues #12 for the history", "an issue number"),
    ("Stop 46's changes, all removing repeated work", "a stop number"),
    ("(`bash /work/runs/ci.sh REV`: a fresh clone)", "a path on one machine"),
    ("ulimits under the host's hard limit (see `shared/TESTHOSTS.md`)", "a folder beside the checkout"),
    ("as ../shared/ARCHITECTURE.md says", "a folder beside the checkout"),
    ("the notes in ../.library/env", "a folder beside the checkout"),
    ("run it with ~/bin/ci-run.sh", "a script outside the repository"),
    ("alone, `/tmp/s29/vvv.py`", "a script outside the repository"),
]


@pytest.mark.parametrize("line, what", OUTSIDE_SAMPLES, ids=[f"outside-{i}" for i in range(len(OUTSIDE_SAMPLES))])
def test_each_kind_of_outside_reference_is_found(line, what):
    assert [found[1] for found in references_outside(line)] == [what]


INSIDE_SAMPLES = [
    "applies `extensions/molecule/shared/converge.yml` to the node",
    "ansible-galaxy collection install gpufleet-cloud-0.1.0.tar.gz   # into ~/.ansible/collections",
    "# Molecule and pytest write here instead of ~/.cache.",
    "Stopped 720 s into the group; the issue's target is 2.5x",
    "`make molecule SCENARIO=baseline` (log: .cache/molecule-logs/baseline.log)",
]


@pytest.mark.parametrize("line", INSIDE_SAMPLES, ids=[f"inside-{i}" for i in range(len(INSIDE_SAMPLES))])
def test_what_stays_inside_the_repository_passes(line):
    assert references_outside(line) == []


def test_a_reference_is_reported_on_its_own_line():
    text = "# Testing\n\nThe budget.\nIt was cut in issue 36.\n"
    assert references_outside(text) == [(4, "an issue number", "issue 36")]
