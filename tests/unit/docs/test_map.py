"""README.md and docs/architecture.md name every role, module, plugin and
CLI subcommand the project has: a new one that neither names fails here,
so the map stays true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = {"README.md": ROOT / "README.md", "docs/architecture.md": ROOT / "docs" / "architecture.md"}
PLUGIN_KINDS = ("modules", "action", "inventory", "callback", "filter", "strategy", "test")


def _things():
    found = [f"role {p.name}" for p in sorted((ROOT / "roles").iterdir()) if (p / "tasks").is_dir()]
    for kind in PLUGIN_KINDS:
        folder = ROOT / "plugins" / kind
        for path in sorted(folder.glob("*.py")) + sorted(folder.glob("*.yml")) if folder.is_dir() else ():
            if not path.name.startswith("_"):
                found.append(f"{kind} {path.stem}")
    return found


# gpufleet's subcommands, from the parsers themselves.
SUBCOMMANDS = ["drift", "guard status", "lab up", "lab down", "lab status"]


@pytest.mark.parametrize("doc", sorted(DOCS))
@pytest.mark.parametrize("thing", _things())
def test_every_role_module_and_plugin_is_on_the_map(doc, thing):
    name = thing.split(" ", 1)[1]
    assert re.search(r"(?<![\w])%s(?![\w])" % re.escape(name), DOCS[doc].read_text()), f"{doc} does not name {thing}"


@pytest.mark.parametrize("doc", sorted(DOCS))
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_is_on_the_map(doc, command):
    assert f"gpufleet {command}" in DOCS[doc].read_text(), f"{doc} does not name gpufleet {command}"


def test_the_subcommands_listed_are_the_clis():
    from gpufleet import cli  # pylint: disable=import-outside-toplevel

    parser = cli.build_parser()
    commands = []
    for action in parser._subparsers._group_actions:  # pylint: disable=protected-access
        for name, sub in action.choices.items():
            inner = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]  # pylint: disable=protected-access
            commands += [f"{name} {n}" for n in inner[0].choices] if inner else [name]
    assert sorted(commands) == sorted(SUBCOMMANDS)
