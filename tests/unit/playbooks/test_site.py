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

import json
import os
import subprocess
import sys
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
    assert block["vars"]["__site_role"] == role and set(block["vars"]) <= {"__site_role", "__site_needs"}
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


def test_a_needed_role_is_one_site_applies_before_the_role_that_needs_it():
    applied = [b["vars"] for play in ROLE_PLAYS for b in blocks(play)]
    needs = {v["__site_role"]: v["__site_needs"] for v in applied if "__site_needs" in v}
    assert needs == {"cuda": ["nvidia_driver"], "nccl": ["cuda"], "dcgm": ["nvidia_driver", "docker"],
                     "node_health": ["nvidia_driver"]}
    for position, block_vars in enumerate(applied):
        before = [v["__site_role"] for v in applied[:position]]
        for needed in block_vars.get("__site_needs", []):
            assert needed in before, (block_vars, needed)


def test_a_converge_names_the_needed_role_that_failed_first(tmp_path):
    """site.yml's own rescue and last task, around three roles that fail:
    the one that needs the first says so, the unrelated one does not."""
    rescue = ROLE_BLOCKS[0]["rescue"]
    fail_task = SITE[-1]["tasks"][0]

    def role(name, needs=None):
        return {"name": name, "vars": {"__site_role": name, **({"__site_needs": needs} if needs else {})},
                "block": [{"name": f"Fail in {name}", "ansible.builtin.fail": {"msg": f"{name} broke"}}],
                "rescue": rescue}

    play = [{"name": "Roles", "hosts": "all", "gather_facts": False,
             "tasks": [role("nvidia_driver"), role("monitoring"), role("cuda", ["nvidia_driver"]),
                       role("nccl", ["cuda", "docker"])]},
            {"name": "Fail the nodes whose roles failed", "hosts": "all", "gather_facts": False,
             "tasks": [fail_task]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "node,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    last = json.loads(done.stdout)["plays"][-1]["tasks"][-1]["hosts"]["node"]
    msg = " ".join(last["msg"].split())
    assert msg.startswith("nvidia_driver, monitoring, cuda, nccl failed on node"), msg
    assert "cuda at 'Fail in cuda': cuda broke (cuda needs nvidia_driver, which failed before it on this node)" in msg
    # Only the needed roles that failed are named (docker never ran).
    assert "nccl at 'Fail in nccl': nccl broke (nccl needs cuda, which failed before it on this node)" in msg
    assert "monitoring broke;" in msg and "monitoring needs" not in msg
