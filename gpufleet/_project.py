"""Where the CLI finds what it runs: a checkout, or an installed collection.

Inside a checkout (galaxy.yml in the working directory or above) the CLI
runs the checkout: its playbooks, its ansible.cfg (whose collections path
names the checkout itself, through collections/), its inventories/lab, and
it keeps the lab and drift reports in the checkout (.lab, .gpufleet).

Outside one it runs the gpufleet.cloud collection that Ansible would load:
the first one on Ansible's configured collection paths (ANSIBLE_COLLECTIONS_PATH,
or collections_path of the ansible.cfg Ansible picks, or Ansible's default
~/.ansible/collections:/usr/share/ansible/collections; then Python's sys.path,
unless collections_scan_sys_path is off), the same search ansible-playbook
makes. Playbooks, ansible.cfg and the lab inventory come from that
collection; drift reports go to the working directory and the lab to
GPUFLEET_LAB_DIR or the user's data directory (default_lab_dir).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

NAMESPACE, NAME = "gpufleet", "cloud"


class CollectionNotFound(RuntimeError):
    """Neither a checkout nor an installed gpufleet.cloud collection."""


@dataclasses.dataclass(frozen=True)
class Project:
    # The collection's root: site.yml, playbooks/, ansible.cfg, inventories/.
    collection: Path
    # Where drift reports, history and drift-waivers.yml are: the checkout,
    # or the working directory.
    workdir: Path
    checkout: bool
    # The collection search path ansible-playbook must get for this
    # collection to be the one it loads. None in a checkout: its ansible.cfg
    # already says (collections/ links the checkout as gpufleet.cloud).
    collections_path: tuple[str, ...] | None = None


def find_checkout(start: Path | None = None) -> Path | None:
    """The checkout that holds galaxy.yml, searched upward from `start`."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "galaxy.yml").is_file():
            return d
    return None


def configured_collection_paths() -> list[str]:
    """The collection search path Ansible itself uses, in its order."""
    # Imported here: reading Ansible's configuration costs a few hundred
    # milliseconds, which `gpufleet --help` need not pay.
    from ansible import constants as C  # pylint: disable=import-outside-toplevel

    paths = [os.path.expanduser(p) for p in C.COLLECTIONS_PATHS]
    if C.COLLECTIONS_SCAN_SYS_PATH:
        paths += [p for p in sys.path if p and p not in paths]
    return paths


def collection_in(path: str | Path) -> Path | None:
    """gpufleet.cloud under one collection path entry, if it holds it. An
    entry may name the directory above ansible_collections or that
    directory itself, as Ansible accepts both."""
    base = Path(path)
    roots = [base] if base.name == "ansible_collections" else [base / "ansible_collections"]
    for root in roots:
        candidate = root / NAMESPACE / NAME
        # MANIFEST.json: installed by ansible-galaxy; galaxy.yml: a checkout
        # linked onto the path. Either way the playbooks must be there.
        if ((candidate / "MANIFEST.json").is_file() or (candidate / "galaxy.yml").is_file()) \
                and (candidate / "playbooks" / "drift.yml").is_file():
            return candidate
    return None


def not_found_message(paths: list[str], start: Path) -> str:
    shown = ":".join(paths) or "(none)"
    return (f"no gpufleet checkout (no galaxy.yml in {start} or above) and no {NAMESPACE}.{NAME} collection on "
            f"Ansible's collection paths ({shown}). Install the collection, e.g. "
            f"`ansible-galaxy collection install {NAMESPACE}-{NAME}-<version>.tar.gz` (into ~/.ansible/collections; "
            f"with -p DIR elsewhere, then set ANSIBLE_COLLECTIONS_PATH=DIR), or run gpufleet inside a checkout")


def locate(start: Path | None = None, paths: list[str] | None = None) -> Project:
    """The checkout above `start` (default: the working directory), else the
    installed collection found on `paths` (default: Ansible's configured
    collection paths). Raises CollectionNotFound, saying what to install."""
    start = (start or Path.cwd()).resolve()
    root = find_checkout(start)
    if root is not None:
        return Project(collection=root, workdir=root, checkout=True)
    paths = configured_collection_paths() if paths is None else list(paths)
    for path in paths:
        found = collection_in(path)
        if found is not None:
            return Project(collection=found, workdir=start, checkout=False, collections_path=tuple(paths))
    raise CollectionNotFound(not_found_message(paths, start))


def default_lab_dir(checkout: Path | None) -> Path:
    """GPUFLEET_LAB_DIR; else the checkout's .lab; else, outside a
    checkout, $XDG_DATA_HOME/gpufleet/lab (~/.local/share/gpufleet/lab): a
    lab outlives any one working directory, as its nodes do. Needs no
    collection, so `gpufleet lab down` works even after it was removed."""
    env = os.environ.get("GPUFLEET_LAB_DIR")
    if env:
        return Path(env)
    if checkout is not None:
        return checkout / ".lab"
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "gpufleet" / "lab"
