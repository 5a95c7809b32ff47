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

from ansible_collections.gpufleet.cloud.plugins.action import node_facts
from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _role_inputs

ROOT = Path(__file__).resolve().parents[3]


class ConditionError(Exception):
    """A check's condition failed to template: with an input of the wrong
    type, the argument validation or the shape check refuses it first."""


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


# What a Debian 12 node's gathered facts give the checks that read them.
FACTS = {
    "os_family": "Debian", "distribution": "Debian", "distribution_release": "bookworm",
    "distribution_major_version": "12", "distribution_version": "12.8", "architecture": "x86_64",
    "service_mgr": "systemd", "kernel": "6.1.0-28-amd64", "hostname": "node1", "fqdn": "node1",
    "default_ipv4": {"address": "10.0.0.5", "interface": "eth0"}, "all_ipv4_addresses": ["10.0.0.5"],
    "all_ipv6_addresses": [], "interfaces": ["lo", "eth0"], "mounts": [], "devices": {}, "memtotal_mb": 65536,
    "processor_vcpus": 16,
    # _common's GPU facts of a node without a GPU or driver yet.
    "gpu": {"count": 0, "gpus": [], "pci_gpus": [], "pci_nvswitches": [], "error": "nvidia-smi: not found",
            "cuda_version": None, "loaded_module_version": None},
    "gpufleet_node": {"container": False, "gpus": {"driver": 0, "bus": 0, "inventory": None}, "has_gpus": False},
}


def _find(tasks, inherited):
    """(the vars of every level above the checks, the checks) of the task
    passing _common_checks, wherever it sits in blocks."""
    found = []
    for task in tasks or ():
        scope = {**inherited, **(task.get("vars") or {})}
        if "_common_checks" in (task.get("vars") or {}):
            found.append((scope, task["vars"]["_common_checks"]))
        for key in ("block", "rescue", "always"):
            found.extend(_find(task.get(key), scope))
    return found


def _preflight(role: str):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "preflight.yml").read_text())
    found = _find(tasks, {})
    assert len(found) == 1, f"{role}: expected one task passing _common_checks, found {len(found)}"
    return found[0]


def checks(role: str) -> list[dict]:
    """The role's _common_checks, as its preflight passes them."""
    return _preflight(role)[1]


def options(role: str) -> set[str]:
    """The role's documented options (meta/argument_specs.yml)."""
    spec = _yaml(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    return set(spec["argument_specs"]["main"]["options"])


def evaluate(role: str, inputs: dict) -> tuple[list[str], list[str]]:
    """(refusals, warnings) as gpufleet.cloud.preflight gives them for these
    inputs over the role's defaults, vars and the preflight task's own vars,
    on a Debian 12 node's facts: the input checks first (shapes, scalar
    types, then what else argument_specs says), and only when they pass,
    the role's own checks, whose messages are those of the checks whose
    condition is false."""
    scope, role_checks = _preflight(role)
    # node_facts' reading of the inventory: a case's gpufleet_gpu counts.
    facts = dict(FACTS, gpufleet_node=dict(FACTS["gpufleet_node"], **node_facts.gpu_facets(
        FACTS["gpu"], False, node_facts.inventory_gpus(inputs.get("gpufleet_gpu")), False)))
    variables = {"inventory_hostname": "node1", "groups": {"all": ["node1"], "ungrouped": ["node1"]},
                 "ansible_facts": facts, "ansible_local": {},
                 **_yaml(ROOT / "roles" / role / "defaults" / "main.yml"),
                 **_yaml(ROOT / "roles" / role / "vars" / "main.yml"), "role_path": str(ROOT / "roles" / role),
                 **{k: v for k, v in scope.items() if k != "_common_checks"}, **inputs}
    templar = Templar(loader=DataLoader(), variables=_trusted(variables))
    spec = _role_inputs.RoleSpec(str(ROOT / "roles" / role), role)
    values = {}
    for name in spec.options:
        if name in variables:
            try:
                values[name] = templar.template(_trusted(variables[name]))
            except Exception:  # pylint: disable=broad-exception-caught
                continue  # as the action: the role's own use of it names the failure
    fleet = {name: inputs[name] for name in _role_inputs.FLEET if name in inputs}
    refused = _role_inputs.input_errors(spec, values, fleet)
    if refused:
        return refused, []
    warned = []
    for check in role_checks:
        try:
            passed = templar.template(_trusted(check["that"]))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            raise ConditionError(f"{role}: {check['that']!r} does not template: {exc}") from exc
        if not passed:
            message = " ".join(str(templar.template(_trusted(check["msg"]))).split())
            (warned if check.get("warn") else refused).append(message)
    return refused, warned


def named(role: str, message: str) -> set[str]:
    """The role's options a message names."""
    return {o for o in options(role) if re.search(r"(?<![\w.])%s(?![\w])" % re.escape(o), message)}
