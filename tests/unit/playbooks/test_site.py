"""site.yml's structure for a run that meets a failure, or that --tags
limits to some roles (`gpufleet drift --fix` converges only the drifted
roles' tags):

- every role is a block of its own, tagged with the role's short name, whose
  rescue records the failure and lets the node's other roles go on;
- every play that applies roles reads on past a failed check in check mode,
  and ends with the rolling-run gate; the last play fails each node a role
  failed on;
- every role a play includes (not imports) gets the including block's tags
  applied, so a run limited to any of those tags runs what it includes (the
  GPU nodes' health gate reads node_health's result under --tags
  nvidia_driver).

The runs: tests/integration/test_drift.py (a blocker row, and the driver,
cuda and node_health roles alone on the GPU-stack node)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SITE = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
ROLE_PLAYS = [play for play in SITE if play.get("become")]
GATE = "Fail the node at this play's end when a role of it failed in a rolling run"


def blocks(play):
    return [t for section in ("tasks", "post_tasks") for t in play.get(section) or () if "block" in t]


def imported_role(block):
    roles = [t["ansible.builtin.import_role"]["name"] for t in block["block"] if "ansible.builtin.import_role" in t]
    return roles[0] if len(roles) == 1 else None


ROLE_BLOCKS = [b for play in ROLE_PLAYS for b in blocks(play) if imported_role(b)]
SITE_ROLES = sorted(imported_role(b).rsplit(".", 1)[-1] for b in ROLE_BLOCKS)
# Every public role except those site.yml does not apply (pull mode's own).
PUBLIC_ROLES = sorted(p.name for p in (ROOT / "roles").iterdir()
                      if (p / "tasks").is_dir() and not p.name.startswith("_") and p.name != "pull")


def test_site_applies_every_role_once_and_only_in_blocks():
    assert SITE_ROLES == PUBLIC_ROLES
    assert not any(play.get("roles") for play in SITE), "a roles: section fails the whole node at its first failure"


@pytest.mark.parametrize("role", SITE_ROLES)
def test_each_role_is_a_block_tagged_with_its_name_that_records_its_failure(role):
    block = next(b for b in ROLE_BLOCKS if imported_role(b) == f"gpufleet.cloud.{role}")
    assert block["tags"] == [role], block["tags"]
    assert block["vars"] == {"__site_role": role}
    # One rescue for all: it records the role and goes on.
    assert block["rescue"] == ROLE_BLOCKS[0]["rescue"]
    (record,) = block["rescue"]
    assert "gpufleet_site_failed_roles" in record["ansible.builtin.set_fact"]


@pytest.mark.parametrize("play", [p["name"] for p in ROLE_PLAYS])
def test_each_role_play_reads_past_a_failed_check_and_ends_with_the_batch_gate(play):
    play = next(p for p in ROLE_PLAYS if p["name"] == play)
    assert play["ignore_errors"] == "{{ ansible_check_mode }}"
    last = (play.get("post_tasks") or play["tasks"])[-1]
    assert last["name"] == GATE and {"always", "gpufleet_drift_ignore"} <= set(last["tags"])
    # Every role block and the health gate share the one rescue.
    for block in blocks(play):
        assert block["rescue"] == ROLE_BLOCKS[0]["rescue"], block["name"]


def test_the_last_play_fails_every_node_a_role_failed_on():
    last = SITE[-1]
    assert last["hosts"] == "all" and last["tags"] == ["always"]
    (task,) = last["tasks"]
    assert "ansible.builtin.fail" in task and "gpufleet_site_failed_roles" in task["when"]


INCLUDES = [(b, t) for play in SITE for b in blocks(play) for t in b["block"] if "ansible.builtin.include_role" in t]


def test_there_is_an_included_role_to_check():
    assert [t["ansible.builtin.include_role"]["name"] for _b, t in INCLUDES] == ["gpufleet.cloud.node_health"]


@pytest.mark.parametrize("tag", sorted({tag for b, _t in INCLUDES for tag in b["tags"]}))
def test_every_tag_that_runs_an_include_runs_what_it_includes(tag):
    for block, task in INCLUDES:
        if tag in block["tags"]:
            applied = (task["ansible.builtin.include_role"].get("apply") or {}).get("tags") or []
            assert tag in applied, (block["name"], tag, applied)
