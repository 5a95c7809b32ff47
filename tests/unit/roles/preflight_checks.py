"""A role's own preflight checks (the _common_checks its tasks/preflight.yml
passes to gpufleet.cloud.preflight), evaluated on the controller as the
action evaluates them, over the role's defaults and vars and a case's
inputs: which checks refuse, which warn, and with what message. Quick and
without a node, so every message can be held to one option each; the lab's
bad-input suites prove the same refusals end to end."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[3]


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def _yaml(path: Path) -> dict:
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def checks(role: str) -> list[dict]:
    """The role's _common_checks, as its preflight passes them."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "preflight.yml").read_text())
    found = [t["vars"]["_common_checks"] for t in tasks if "_common_checks" in (t.get("vars") or {})]
    assert len(found) == 1, f"{role}: expected one task passing _common_checks, found {len(found)}"
    return found[0]


def options(role: str) -> set[str]:
    """The role's documented options (meta/argument_specs.yml)."""
    spec = _yaml(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    return set(spec["argument_specs"]["main"]["options"])


def evaluate(role: str, inputs: dict) -> tuple[list[str], list[str]]:
    """(refusals, warnings): the messages of the role's checks whose
    condition is false with these inputs over the role's defaults."""
    variables = {**_yaml(ROOT / "roles" / role / "defaults" / "main.yml"),
                 **_yaml(ROOT / "roles" / role / "vars" / "main.yml"), "role_path": str(ROOT / "roles" / role), **inputs}
    templar = Templar(loader=DataLoader(), variables=_trusted(variables))
    refused, warned = [], []
    for check in checks(role):
        if not templar.template(_trusted(check["that"])):
            message = " ".join(str(templar.template(_trusted(check["msg"]))).split())
            (warned if check.get("warn") else refused).append(message)
    return refused, warned


def named(role: str, message: str) -> set[str]:
    """The role's options a message names."""
    return {o for o in options(role) if re.search(r"(?<![\w.])%s(?![\w])" % re.escape(o), message)}
