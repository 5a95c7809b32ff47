"""A task skipped in check mode must say so on its own: with
`when: A and not ansible_check_mode`, a skip because A is false still names
check mode, and drift reports the task as could-not-verify on every node
where it simply does not apply."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        if "when" in node:
            yield node
        for key in ("block", "rescue", "always"):
            yield from tasks(node.get(key))


def top_level_and(text: str) -> list[str]:
    """The operands of a Jinja test's top-level `and` (one if there is none)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and text.startswith(" and ", i):
            parts.append(text[start:i])
            start = i = i + 5
            continue
        i += 1
    return parts + [text[start:]]


def test_the_splitter_sees_only_the_top_level():
    assert top_level_and("a and not ansible_check_mode") == ["a", "not ansible_check_mode"]
    assert top_level_and("not (ansible_check_mode and b)") == ["not (ansible_check_mode and b)"]


def test_check_mode_is_its_own_condition():
    offenders = []
    for path in sorted(ROOT.glob("roles/*/*/*.yml")) + sorted(ROOT.glob("playbooks/*.yml")):
        for task in tasks(yaml.safe_load(path.read_text())):
            whens = task["when"] if isinstance(task["when"], list) else [task["when"]]
            for condition in whens:
                operands = top_level_and(" ".join(str(condition).split()))
                if len(operands) > 1 and any("ansible_check_mode" in o for o in operands):
                    offenders.append(f"{path.relative_to(ROOT)}: {task.get('name')}: {condition}")
    assert not offenders, "\n".join(offenders)
