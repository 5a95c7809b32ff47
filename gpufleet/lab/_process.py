"""Background servers the lab runs beside its nodes (the cloud emulator, the
object store): started detached, remembered by a pid file in the lab
directory, and stopped by it, so `gpufleet lab down` finds them from any
later process.

A server counts as stopped only when every thread of its process has ended
and its port refuses connections. Looking at the main thread alone is not
enough: a process whose main thread has exited shows as a zombie in
/proc/PID/stat while its other threads still serve the listening socket,
and a `lab up` straight after would find its own port taken."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

# How long a server gets to end after SIGTERM before SIGKILL, and how long
# after SIGKILL (or after its process ended) its port may take to close.
GRACE_S = 5.0
CLOSE_S = 10.0


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), which
    tells a recycled pid from the process the pid file names."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[19] if len(fields) > 19 else None


def _alive(pid: int) -> bool:
    """True while any thread of `pid` is still running (not a zombie)."""
    try:
        # Reap it if it is our own child (the CLI that started it, or a test).
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # started by an earlier `gpufleet lab up`: not ours to reap
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return False
    for tid in tasks:
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # that thread ended while we looked
        if state not in ("Z", "X"):
            return True
    return False


def _wait(condition, seconds: float) -> bool:
    """Poll `condition` until it holds or `seconds` pass; True if it held."""
    deadline = time.monotonic() + seconds
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _read_pid_file(pid_file: Path) -> dict:
    text = pid_file.read_text().strip()
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        # A pid file from an older gpufleet: the pid alone.
        record = {"pid": int(text) if text.isdigit() else 0}
    return record


def stop(lab_dir: Path, name: str, grace: float = GRACE_S) -> bool:
    """Stop the server `name` this lab started; True if one was running.
    Returns only once its whole process has ended and its port refuses
    connections; raises RuntimeError if the port stays open."""
    pid_file = lab_dir / f"{name}.pid"
    if not pid_file.exists():
        return False
    record = _read_pid_file(pid_file)
    pid = int(record.get("pid") or 0)
    running = pid > 0 and _alive(pid) and record.get("start_time") in (None, _start_time(pid))
    if running:
        _signal(pid, signal.SIGTERM)
        if not _wait(lambda: not _alive(pid), grace):
            _signal(pid, signal.SIGKILL)  # it ignored SIGTERM for `grace` seconds
            if not _wait(lambda: not _alive(pid), CLOSE_S):
                raise RuntimeError(f"the lab's {name} (pid {pid}) did not end after SIGKILL")
    # Only now is the pid file gone: a stop that failed can be run again.
    pid_file.unlink(missing_ok=True)
    host, port = record.get("host"), record.get("port")
    if running and host and port and not _wait(lambda: not listening(host, port), CLOSE_S):
        raise RuntimeError(f"{host}:{port} still accepts connections after the lab's {name} (pid {pid}) ended")
    return running


def _signal(pid: int, sig: int) -> None:
    # The server leads its own session (start_new_session): signal the whole
    # group, so a helper process it started cannot keep the port open.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def start(lab_dir: Path, root: Path, name: str, argv: list[str], host: str, port: int, what: str,
          env: dict[str, str] | None = None, listen_timeout: float = 60.0) -> None:
    """(Re)start server `name` (`argv`, run from `root`, with `env` added to
    this process's environment) and wait up to `listen_timeout` seconds
    until it listens on host:port. `what` names it in errors."""
    stop(lab_dir, name)
    if listening(host, port):
        raise RuntimeError(f"{host}:{port} is taken by another process; the lab's {what} needs it")
    log = (lab_dir / f"{name}.log").open("w")
    # The server outlives this call by design: no `with`.
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        argv, cwd=root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    record = {"pid": proc.pid, "start_time": _start_time(proc.pid), "host": host, "port": port}
    (lab_dir / f"{name}.pid").write_text(json.dumps(record) + "\n")
    # A cold Python start (moto imports boto and Flask) on a loaded machine
    # can take many seconds: wait on the condition, with a deadline.
    deadline = time.monotonic() + listen_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the lab's {what} exited: {_last_line(lab_dir / (name + '.log'))} "
                               f"(see {lab_dir / (name + '.log')})")
        if listening(host, port):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the lab's {what} did not listen on {host}:{port} within {listen_timeout:.0f} s: see {lab_dir / (name + '.log')}")


def _last_line(log: Path) -> str:
    """The last line a server wrote before it exited: usually why."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "it printed nothing"
