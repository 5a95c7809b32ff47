"""The lab's object storage: moto's S3 server, for the backup role's restic
repositories. It listens on podman's bridge gateway (the host side of the
nodes' network), so the nodes reach it and nothing beyond this machine
can; inventories/lab/group_vars/lab.yml points backup_repository_endpoint
at it.

Its data outlives the process. moto keeps objects in memory only, so the
server runs with moto's request recorder on: every request it serves is
appended to a file under the lab directory, and a restart replays that file
before anything else reaches the server. A `gpufleet lab up` (which
restarts the server) or a reboot of this machine therefore keeps every
node's repository; only `gpufleet lab down` deletes the file.

Two limits of moto's recorder, accepted for a lab: it keeps every request,
reads too (their bodies are empty), so the file grows with use; and its
replay assumes nothing else reaches the server meanwhile, so a node's
backup timer that fires during `lab up`'s replay could interleave."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from . import _process

PORT = 18282
NAME = "object-store"


def data_file(lab_dir: Path) -> Path:
    """Where the object store's requests are kept: its whole state."""
    return Path(lab_dir) / NAME / "requests.jsonl"


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
    returns how many stored requests were replayed."""
    path = data_file(lab_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Requests carry the lab's S3 credentials in their headers.
    path.touch(mode=0o600)
    argv = [sys.executable, "-m", "moto.server", "--host", gateway, "--port", str(port)]
    env = {"MOTO_ENABLE_RECORDING": "1", "MOTO_RECORDER_FILEPATH": str(path.resolve())}
    _process.start(lab_dir, root, NAME, argv, gateway, port, "object store", env=env)
    with path.open("rb") as fh:
        stored = sum(1 for _line in fh)
    if stored:
        _replay(gateway, port, timeout, path)
    return stored


def _replay(gateway: str, port: int, timeout: float, path: Path) -> None:
    # moto does not record while it replays, so the file is not doubled.
    request = urllib.request.Request(f"http://{gateway}:{port}/moto-api/recorder/replay-recording",
                                     method="POST", data=b"")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            if reply.status != 200:
                raise RuntimeError(f"the lab's object store did not restore {path}: HTTP {reply.status}")
    except (urllib.error.URLError, TimeoutError) as exc:
        raise RuntimeError(f"the lab's object store did not restore {path}: {exc}. "
                           "`gpufleet lab down` deletes the stored data and starts again empty") from exc
