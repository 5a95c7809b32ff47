"""The lab's object storage: moto's S3 server, for the backup role's restic
repositories. It listens on podman's bridge gateway (the host side of the
nodes' network), so the nodes reach it and nothing beyond this machine
can; inventories/lab/group_vars/lab.yml points backup_repository_endpoint
at it."""

from __future__ import annotations

import sys
from pathlib import Path

from . import _process

PORT = 18282


def stop(lab_dir: Path) -> bool:
    """Stop the object store this lab started; True if one was running."""
    return _process.stop(lab_dir, "object-store")


def start(lab_dir: Path, root: Path, gateway: str, port: int = PORT) -> None:
    """(Re)start an empty object store on gateway:port."""
    argv = [sys.executable, "-m", "moto.server", "--host", gateway, "--port", str(port)]
    _process.start(lab_dir, root, "object-store", argv, gateway, port, "object store")
