"""Background servers the lab runs beside its nodes (the cloud emulator, the
object store): started detached, remembered by a pid file in the lab
directory, and stopped by it, so `gpufleet lab down` finds them from any
later process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent to reap it."""
    try:
        # Reap it if it is our own child (the CLI that started it, or a test).
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # started by an earlier `gpufleet lab up`: not ours to reap
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def stop(lab_dir: Path, name: str) -> bool:
    """Stop the server `name` this lab started; True if one was running."""
    pid_file = lab_dir / f"{name}.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().strip() or 0)
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    if not _gone(pid, 5.0):
        os.kill(pid, signal.SIGKILL)  # it ignored SIGTERM for 5 s
        _gone(pid, 5.0)
    return True


def _gone(pid: int, seconds: float) -> bool:
    """Wait up to `seconds` for `pid` to end; True if it did."""
    for _attempt in range(int(seconds * 10)):
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def start(lab_dir: Path, root: Path, name: str, argv: list[str], host: str, port: int, what: str) -> None:
    """(Re)start server `name` (`argv`, run from `root`) and wait until it
    listens on host:port. `what` names it in errors."""
    stop(lab_dir, name)
    if listening(host, port):
        raise RuntimeError(f"{host}:{port} is taken by another process; the lab's {what} needs it")
    log = (lab_dir / f"{name}.log").open("w")
    # The server outlives this call by design: no `with`.
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        argv, cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    (lab_dir / f"{name}.pid").write_text(f"{proc.pid}\n")
    for _attempt in range(150):
        if proc.poll() is not None:
            raise RuntimeError(f"the lab's {what} exited: see {lab_dir / (name + '.log')}")
        if listening(host, port):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the lab's {what} did not listen on {host}:{port}")
