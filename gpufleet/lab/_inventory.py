"""The lab's own inventory, written into the lab directory by `gpufleet lab
up`: <lab dir>/inventory. It is the collection's inventories/lab (the
checkout's, or the one an installed collection ships), so its settings have
one source, plus one file that points it at this lab directory's key and
known_hosts. inventories/lab itself finds them in the checkout's .lab; this
copy works for any lab directory and outside a checkout:

    gpufleet drift -i <lab dir>/inventory
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

# Sorted after the copied lab.yml in group_vars/lab/, so its value wins
# (Ansible reads a group's variable files in name order, later ones over
# earlier ones).
_OVERRIDE = "zz-gpufleet-lab-dir.yml"


def path(lab_dir: Path) -> Path:
    return Path(lab_dir) / "inventory"


def write(lab_dir: Path, source: Path) -> Path:
    """(Re)write <lab_dir>/inventory from `source` (an inventories/lab);
    returns its path."""
    source = Path(source)
    if not (source / "aliyun_ecs.yml").is_file():
        raise RuntimeError(f"{source} is not the lab inventory (no aliyun_ecs.yml there): the gpufleet.cloud "
                           "collection in use is incomplete; reinstall it, or run from a checkout")
    dest = path(lab_dir)
    lab_dir_abs = Path(lab_dir).resolve()
    # Written whole each time, so a collection upgraded between two `lab up`
    # runs leaves nothing of the old inventory behind.
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    group_dir = dest / "group_vars" / "lab"
    group_dir.mkdir(parents=True, exist_ok=True)
    flat = dest / "group_vars" / "lab.yml"
    if flat.exists():
        # A group's vars file and directory together have no documented
        # order; in the directory, the override is read last for sure.
        flat.rename(group_dir / "00-lab.yml")
    (group_dir / _OVERRIDE).write_text(
        "---\n# Written by `gpufleet lab up`: this lab's key and known_hosts are in its lab directory.\n"
        + yaml.safe_dump({"gpufleet_lab_dir": str(lab_dir_abs)}, sort_keys=False)
    )
    return dest
