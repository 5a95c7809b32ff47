"""_common's apt_index on a podman node: the index is refreshed exactly
when ansible.builtin.apt's cache_valid_time would refresh it (by
update-success-stamp where it exists, else by the lists directory's
mtime), and always when the node has no package lists; otherwise the apt
module does not run at all."""

from __future__ import annotations

import json

import pytest

from tests.support.nodes import PODMAN_CONNECTION, node_exec, run_playbook

pytestmark = pytest.mark.lab

STAMP = "/var/lib/apt/periodic/update-success-stamp"
LISTS = "/var/lib/apt/lists"
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Refresh once per run
      ansible.builtin.import_role:
        name: gpufleet.cloud._common
        tasks_from: apt_index
      vars:
        _common_apt_cache_valid_time: 3600
"""

# (what the node's apt state is made, whether the index must be refreshed)
STATES = [
    (f"touch {LISTS}", False),                                          # refreshed a moment ago
    (f"touch -d '2 hours ago' {LISTS}", True),                          # older than cache_valid_time
    (f"mkdir -p {STAMP.rsplit('/', 1)[0]} && touch {STAMP}", False),    # the stamp wins over the old directory
    (f"touch {LISTS} && touch -d '2 hours ago' {STAMP}", True),         # and an old stamp over a new directory
    (f"rm {STAMP} && touch {LISTS} && rm {LISTS}/*_Packages*", True),   # no lists at all, however new
]


def refreshed(node: str, workdir) -> bool:
    """Whether a run of apt_index refreshed the index (ran the apt module)."""
    play = workdir / "apt-index.yml"
    play.write_text(PLAY)
    done = run_playbook("-i", f"{node},", "-c", PODMAN_CONNECTION, str(play),
                        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    (refresh,) = [task["hosts"][node] for task in tasks if task["task"]["name"].endswith("Refresh the apt package index")]
    return not refresh.get("skipped")


def test_the_index_is_refreshed_when_apt_would_refresh_it(fresh_node, tmp_path):
    seen = []
    for setup, want in STATES:
        assert node_exec(fresh_node, "sh", "-c", setup).returncode == 0, setup
        seen.append((setup, refreshed(fresh_node, tmp_path), want))
    assert all(got == want for _setup, got, want in seen), seen
    # The refresh without lists brought them back.
    assert node_exec(fresh_node, "sh", "-c", f"ls {LISTS}/*_Packages*").returncode == 0
