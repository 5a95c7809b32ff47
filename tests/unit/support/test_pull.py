"""tests/support/pull.py: the site's settings handed to a node's pull run
are the inventory's group variables without the connection's and
gpufleet_*; the repository a node pulls is the tree under test, with what
is not committed yet and the pinned collections, and without what git
ignores."""

from __future__ import annotations

import json
import subprocess

from tests.support import pull


def test_the_site_settings_are_the_group_variables_less_connection_and_gpufleet(monkeypatch):
    host = {"ansible_user": "gpufleet", "ansible_port": 2201, "gpufleet_lab_dir": "{{ inventory_dir }}/../../.lab",
            "gpufleet_provider": "aliyun", "gpufleet_site_gpu_stack": False, "baseline_ntp_servers": ["127.0.0.1"],
            "backup_repository_bucket": "gpufleet-lab-backup"}
    seen = []

    def run(argv, **_kwargs):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(host), stderr="")

    monkeypatch.setattr(pull.subprocess, "run", run)
    assert pull.site_vars("lab-node-1") == {"baseline_ntp_servers": ["127.0.0.1"],
                                            "backup_repository_bucket": "gpufleet-lab-backup"}
    assert seen[0][0].endswith("ansible-inventory")
    assert seen[0][1:] == ["-i", "inventories/lab", "--host", "lab-node-1"]


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=cwd,
                          capture_output=True, text=True, check=True).stdout


def test_the_repository_is_the_tree_as_it_is_with_the_collections(monkeypatch, tmp_path):
    root = tmp_path / "checkout"
    (root / "roles").mkdir(parents=True)
    (root / ".gitignore").write_text(".collections/\n.venv/\n")
    (root / "roles" / "main.yml").write_text("committed\n")
    (root / "gone.yml").write_text("deleted after the commit\n")
    (root / "collections").mkdir()
    (root / "collections" / "cloud").symlink_to("../roles")
    git("init", "--quiet", ".", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "--quiet", "-m", "one", cwd=root)
    (root / "roles" / "main.yml").write_text("changed, not committed\n")
    (root / "new.yml").write_text("not added\n")
    (root / "gone.yml").unlink()
    (root / ".venv").mkdir()
    (root / ".venv" / "ignored").write_text("x\n")
    (root / ".collections" / "ansible_collections").mkdir(parents=True)
    (root / ".collections" / "ansible_collections" / "pinned.txt").write_text("pinned\n")
    monkeypatch.setattr(pull, "ROOT", root)

    bare = pull.repository(tmp_path / "work")

    assert git("symbolic-ref", "--short", "HEAD", cwd=bare).strip() == pull.BRANCH
    files = set(git("ls-tree", "-r", "--name-only", pull.BRANCH, cwd=bare).split())
    assert files == {".gitignore", "roles/main.yml", "new.yml", ".collections/ansible_collections/pinned.txt",
                     "collections/cloud"}
    # The link is a link still, to the same place.
    assert git("ls-tree", pull.BRANCH, "collections/cloud", cwd=bare).startswith("120000 ")
    assert git("show", f"{pull.BRANCH}:collections/cloud", cwd=bare) == "../roles"
    assert git("show", f"{pull.BRANCH}:roles/main.yml", cwd=bare) == "changed, not committed\n"
