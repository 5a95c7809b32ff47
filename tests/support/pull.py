"""Pull mode on lab nodes, as a fleet sets it up: the repository a node
pulls, the site's settings a pull run is handed, and what a node needs to
install Ansible from PyPI. Used by the pull lab test
(tests/integration/test_pull_fleet.py) and the pull-node bench
(bench/pull/node.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.nodes import ROOT, ansible_env

# Where the node finds the repository: the nodes cannot reach a git server.
REPOSITORY = "/srv/gpufleet-pull.git"
CHECKOUT = "/var/lib/gpufleet/pull/checkout"  # pull_directory's default
REPORT = "/var/lib/gpufleet/pull/drift.json"
TEXTFILE = "/var/lib/prometheus/node-exporter/gpufleet_pull.prom"
PREFIX = "gpufleet/drift"  # pull_report_prefix's default
BRANCH = "main"
# Host variables of the lab's inventory that a pull run is not handed as
# the site's settings: how this machine reaches the node (ansible_*), and
# gpufleet_*, which playbooks/pull.yml hands it itself (the
# gpufleet.cloud.node_vars filter), or which are the lab's own paths.
NOT_SITE = ("ansible_", "gpufleet_")
_GIT = ["git", "-c", "user.name=gpufleet-test", "-c", "user.email=test@gpufleet.invalid", "-c", "init.defaultBranch=main"]


def site_vars(host: str, inventory: str = "inventories/lab") -> dict:
    """The inventory's variables for `host` that the node's pull run
    cannot see (a pull run has no inventory): its group variables."""
    # The venv's, as `python -m bench...` runs without it on PATH.
    ansible_inventory = shutil.which("ansible-inventory", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    out = subprocess.run([ansible_inventory, "-i", inventory, "--host", host], cwd=ROOT, env=ansible_env(),
                         capture_output=True, text=True, check=True).stdout
    return {k: v for k, v in json.loads(out).items() if not k.startswith(NOT_SITE)}


def repository(work: Path) -> Path:
    """A bare repository (branch BRANCH) of this checkout's files as they
    are now, committed or not (what is under test), with the pinned
    collections (.collections) committed: the nodes cannot reach Galaxy."""
    src, bare = work / "src", work / "gpufleet-pull.git"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if not (source.is_symlink() or source.is_file()):
            continue  # deleted, not yet committed
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        # A link stays a link: collections/ links the collection to the tree.
        shutil.copy2(source, src / name, follow_symlinks=False)
    shutil.copytree(ROOT / ".collections", src / ".collections", symlinks=True)
    subprocess.run([*_GIT, "init", "--quiet", str(src)], check=True)
    subprocess.run([*_GIT, "-C", str(src), "add", "--all", "--force", "."], check=True)
    subprocess.run([*_GIT, "-C", str(src), "commit", "--quiet", "-m", "the tree under test"], check=True)
    subprocess.run(["git", "clone", "--quiet", "--bare", str(src), str(bare)], check=True)
    return bare


def install_repository(container: str, bare: Path) -> None:
    """The bare repository at REPOSITORY on the node, and an earlier
    checkout of it gone."""
    subprocess.run(["podman", "exec", container, "rm", "-rf", REPOSITORY, CHECKOUT], check=True)
    subprocess.run(["podman", "cp", str(bare), f"{container}:{REPOSITORY}"], check=True)


def trust_host_cas(container: str) -> None:
    """The node installs Ansible from PyPI through this machine's egress,
    which may present its own CA: the node trusts what this machine
    trusts, and pip reads the system bundle (as the Molecule pull
    scenario's prepare does)."""
    for cert in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt")):
        subprocess.run(["podman", "cp", str(cert), f"{container}:/usr/local/share/ca-certificates/"], check=True)
    subprocess.run(["podman", "exec", container, "sh", "-c", "update-ca-certificates >/dev/null && printf "
                    "'[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > /etc/pip.conf"], check=True)


def pull_vars(site: dict) -> dict:
    """playbooks/pull.yml's variables for the lab: the repository on the
    node, ansible-core, the site's settings, and no timer run of its own
    before a day has passed (the callers start the runs)."""
    return {
        "pull_repo_url": f"file://{REPOSITORY}",
        "pull_branch": BRANCH,
        "pull_ansible_package": "ansible-core",
        "pull_check_mode_enabled": True,
        "pull_site_extra_vars": site,
        "pull_first_run_delay_seconds": 86400,
        "pull_splay_seconds": 0,
    }
