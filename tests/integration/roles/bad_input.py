"""The shared check of the roles' bad-input tests: a run with bad inputs
fails before anything changes, names the variable (and the reason, where a
case gives one), and leaves the node as it was.

All of a role's cases run in one ansible-playbook run against the module's
fresh node: each case is its own inventory host (an alias of that node)
carrying its inputs as host variables, the way users set them in
group_vars. Every alias must fail on its own, in its own result, with no
change reported for it; the files and packages the role manages must still
be absent afterwards. One run instead of one per case saves Ansible's
start-up and the fact gathering of every case but the first, and loses
nothing a case proves: a case whose input were wrongly accepted goes on to
change the node, and its alias reports it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.nodes import PODMAN_CONNECTION, PODMAN_PYTHON, node_has_package, node_has_path, run_playbook


def alias(index: int) -> str:
    return f"case{index:03d}"


def site_like_play(roles: str | list[str]) -> str:
    """A play that applies each role as site.yml does: with
    rolespec_validate: false, so the role's preflight, not Ansible's
    argument validation, answers a wrong type (in the project's words)."""
    tasks = "".join(f"""
    - name: Apply {role}
      ansible.builtin.import_role:
        name: {role}
        rolespec_validate: false
""" for role in ([roles] if isinstance(roles, str) else roles))
    return f"""
- hosts: all
  gather_facts: true
  tasks:{tasks}"""


def run_cases(node: str, role: str | list[str], cases: dict[str, dict], workdir: Path) -> dict:
    """Apply `role` (or each of a list of roles, in order) once to every
    case (case id -> input variables), each as its own alias of `node`.
    Returns the run's exit code, its whole output, and per case: its stats
    and the text of its own results."""
    aliases = {case: alias(i) for i, case in enumerate(cases)}
    node_vars = {"ansible_host": node, "ansible_connection": PODMAN_CONNECTION, "ansible_python_interpreter": PODMAN_PYTHON}
    hosts = {aliases[case]: {**node_vars, **variables} for case, variables in cases.items()}
    inventory = workdir / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    play = workdir / "play.yml"
    play.write_text(site_like_play(role))
    # One structured record per host and task, so each case's message is
    # read from that case's own results.
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_FORKS": str(max(5, len(cases)))}
    result = run_playbook("-i", str(inventory), str(play), env=env)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"ansible-playbook did not print its JSON report:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    texts = {name: [] for name in hosts}
    for play_ in report.get("plays", []):
        for task in play_.get("tasks", []):
            for name, host_result in task.get("hosts", {}).items():
                if name in texts and (host_result.get("failed") or host_result.get("changed")):
                    texts[name].append(f"TASK [{task['task']['name']}] " + json.dumps(host_result))
    output = result.stdout + result.stderr
    return {
        "rc": result.returncode,
        "output": output,
        "cases": {
            case: {"stats": report.get("stats", {}).get(name, {}), "text": "\n".join(texts[name])}
            for case, name in aliases.items()
        },
    }


def assert_case_refused(outcome: dict, case: str, variable: str, reason: str | None = None) -> str:
    """One case of a run_cases() outcome failed exactly once, before any
    change, naming `variable` (and giving `reason`) in its own results.
    Returns the case's text."""
    mine = outcome["cases"][case]
    where = f"case {case!r}:\n{mine['text'] or outcome['output'][-3000:]}"
    assert outcome["rc"] == 2, f"exit {outcome['rc']}: " + where
    assert mine["stats"].get("failures") == 1, f"it did not fail exactly once: {mine['stats']}\n" + where
    assert mine["stats"].get("changed") == 0, f"it changed the node: {mine['stats']}\n" + where
    assert variable in mine["text"], f"the error does not name {variable}:\n" + where
    if reason:
        assert reason in mine["text"], f"the error does not say {reason!r}:\n" + where
    return mine["text"]


def bad_input_test(role, cases, files=(), packages=(), good=None, forbidden=()):
    """The parametrized test of one role's bad-input cases.

    cases: id -> (input variables, the variable the error must name[, the
    reason it must give]); `good` holds valid inputs every case starts
    from, so each case has exactly one thing wrong. files and packages are
    what the role manages, which must stay absent; no string of
    `forbidden` (secrets) may show anywhere in the run's output."""
    inputs = {case: {**(good or {}), **spec[0]} for case, spec in cases.items()}
    runs = {}

    def batch(node, tmp_path_factory):
        if node not in runs:
            outcome = run_cases(node, role, inputs, tmp_path_factory.mktemp("bad-input"))
            outcome["left_behind"] = [p for p in files if node_has_path(node, p)]
            outcome["left_behind"] += [f"package {p}" for p in packages if node_has_package(node, p)]
            runs[node] = outcome
        return runs[node]

    @pytest.mark.parametrize("case", list(cases), ids=list(cases))
    def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node, tmp_path_factory):
        variable, reason = cases[case][1], (cases[case][2] if len(cases[case]) > 2 else None)
        outcome = batch(fresh_node, tmp_path_factory)
        assert_case_refused(outcome, case, variable, reason)
        assert not outcome["left_behind"], f"the failed runs left these on the node: {outcome['left_behind']}"
        for secret in forbidden:
            assert secret not in outcome["output"], f"{secret!r} shows in the output"

    # The valid inputs every case starts from, for the unit harness
    # (tests/unit/roles/test_preflight_messages.py), which checks the same cases.
    test_bad_input_fails_in_preflight_and_changes_nothing.good = dict(good or {})
    return test_bad_input_fails_in_preflight_and_changes_nothing
