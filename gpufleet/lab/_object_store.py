"""The lab's object storage: moto's S3 server, for the backup role's restic
repositories. It listens on podman's bridge gateway (the host side of the
nodes' network), so the nodes reach it and nothing beyond this machine
can; inventories/lab/group_vars/lab.yml points backup_repository_endpoint
at it.

Its data outlives the process. moto keeps objects in memory only, so the
server (_object_store_server) keeps a journal of every change it answered
with success, under the lab directory, and replays it before it listens
again. A `gpufleet lab up` (which restarts the server) or a reboot of this
machine therefore keeps every node's repository; only `gpufleet lab down`
deletes the journal. The journal grows with every backup and prune: it is
never compacted, which a lab can afford."""

from __future__ import annotations

import sys
from pathlib import Path

from . import _process

PORT = 18282
NAME = "object-store"


def data_file(lab_dir: Path) -> Path:
    """The object store's journal: its whole state."""
    return Path(lab_dir) / NAME / "journal.jsonl"


def stop(lab_dir: Path) -> bool:
    """Stop the object store this lab started; True if one was running.
    Its data stays on disk."""
    return _process.stop(lab_dir, NAME)


def delete_data(lab_dir: Path) -> bool:
    """Delete the object store's data; True if there was any."""
    path = data_file(lab_dir)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


def start(lab_dir: Path, root: Path, gateway: str, port: int = PORT, timeout: float = 300.0) -> int:
    """(Re)start the object store on gateway:port with the data it had;
    returns how many stored changes it restored. `timeout` bounds the
    restore, which happens before the server listens."""
    path = data_file(lab_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The records carry the lab's S3 credentials in their headers.
    path.touch(mode=0o600)
    path.chmod(0o600)
    with path.open("rb") as fh:
        stored = sum(1 for line in fh if line.endswith(b"\n"))
    argv = [sys.executable, "-m", "gpufleet.lab._object_store_server", "--host", gateway, "--port", str(port),
            "--journal", str(path.resolve())]
    _process.start(lab_dir, root, NAME, argv, gateway, port, "object store", listen_timeout=timeout)
    return stored
