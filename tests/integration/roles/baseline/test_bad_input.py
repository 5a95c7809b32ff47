"""Bad inputs to gpufleet.cloud.baseline fail before anything changes.

Each case runs the role against a fresh real node and checks three things:
the run fails, the message names the bad variable, and nothing on the node
changed (no task reported a change, and the files and packages the role
would manage are still absent)."""

from __future__ import annotations

import json

import pytest

from tests.integration.helpers import node_exec, recap, run_playbook

pytestmark = pytest.mark.lab

PLAYBOOK = """
- hosts: all
  gather_facts: true
  roles:
    - gpufleet.cloud.baseline
"""

CASES = {
    "wrong type: list expected": ({"baseline_packages": "curl"}, "baseline_packages"),
    "wrong type: int expected": ({"baseline_nofile": "lots"}, "baseline_nofile"),
    "unknown choice": ({"baseline_kernel_apply": "sometimes"}, "baseline_kernel_apply"),
    "wrong type: bool expected": ({"baseline_time_sync": "perhaps"}, "baseline_time_sync"),
    "bad package name": ({"baseline_extra_packages": ["curl; rm -rf /"]}, "baseline_extra_packages"),
    "bad sysctl key": ({"baseline_sysctl_extra": {"not a key": 1}}, "baseline_sysctl"),
    "nested sysctl value": ({"baseline_sysctl_extra": {"vm.swappiness": {"a": 1}}}, "baseline_sysctl"),
    "bad memlock": ({"baseline_memlock": "lots"}, "baseline_memlock"),
    "bad hostname": ({"baseline_hostname": "Bad_Host!"}, "baseline_hostname"),
    "bad ntp server": ({"baseline_ntp_servers": ["ntp server"]}, "baseline_ntp_servers"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node, tmp_path):
    extra_vars, variable = CASES[case]
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    result = run_playbook(
        "-i", f"{fresh_node},",
        "-c", "containers.podman.podman",
        "-e", json.dumps(extra_vars),
        str(playbook),
    )
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert variable in out, f"the error does not name {variable}:\n{out}"
    stats = recap(result.stdout)[fresh_node]
    assert stats["failed"] == 1 and stats["changed"] == 0, out
    # Nothing the role manages exists on the node.
    assert node_exec(fresh_node, "test", "-e", "/etc/sysctl.d/90-gpufleet-baseline.conf").returncode == 1
    assert node_exec(fresh_node, "test", "-e", "/etc/security/limits.d/90-gpufleet-baseline.conf").returncode == 1
    status = node_exec(fresh_node, "dpkg-query", "-W", "-f", "${Status}", "chrony").stdout
    assert "installed" not in status.split(), status
