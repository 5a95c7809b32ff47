"""The shared check of the roles' bad-input tests: a run with bad
variables fails in preflight, names the variable and the reason, and
leaves the node as it was."""

from __future__ import annotations

import json

import pytest

from tests.integration.helpers import node_exec, recap, run_playbook


def playbook(roles: list[str]) -> str:
    lines = ["- hosts: all", "  gather_facts: true", "  roles:"]
    return "\n".join(lines + [f"    - {role}" for role in roles]) + "\n"


def assert_fails_in_preflight(node, tmp_path, roles, extra_vars, variable, reason, managed):
    path = tmp_path / "play.yml"
    path.write_text(playbook(roles))
    result = run_playbook("-i", f"{node},", "-c", "containers.podman.podman", "-e", json.dumps(extra_vars), str(path))
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert variable in out, f"the error does not name {variable}:\n{out}"
    assert reason in out, f"the error does not say {reason!r}:\n{out}"
    stats = recap(result.stdout)[node]
    assert stats["failed"] == 1 and stats["changed"] == 0, out
    for path_ in managed["files"]:
        assert node_exec(node, "test", "-e", path_).returncode == 1, f"{path_} exists"
    for package in managed["packages"]:
        status = node_exec(node, "dpkg-query", "-W", "-f", "${Status}", package).stdout
        assert "installed" not in status.split(), f"{package}: {status}"


def bad_input_test(role, cases, files, packages):
    """The parametrized test of one role's bad-input cases: each case is
    extra vars, the variable the error must name, and the reason it must
    give; files and packages are what the role manages, which must stay absent."""
    managed = {"files": files, "packages": packages}

    @pytest.mark.parametrize("case", cases, ids=list(cases))
    def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node, tmp_path):
        extra_vars, variable, reason = cases[case]
        assert_fails_in_preflight(fresh_node, tmp_path, [role], extra_vars, variable, reason, managed)

    return test_bad_input_fails_in_preflight_and_changes_nothing
