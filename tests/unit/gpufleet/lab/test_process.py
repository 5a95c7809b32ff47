"""The lab's background servers: stopped means every thread has ended and
the port refuses connections, so a `lab up` straight after a `lab down`
never finds its own port taken."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpufleet.lab import Lab, _emulator, _object_store, _process, _ssh
from tests.support.ports import free_port
from tests.unit.gpufleet.lab.test_lab import FakePodman

ROOT = Path(__file__).resolve().parents[4]

# The raw exit(2) system call ends only the calling thread. glibc's exit()
# and Python's os._exit() end the whole process (exit_group), so this is
# the way to leave a zombie main thread while another thread serves.
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())

# A server whose main thread exits at once while a second thread keeps the
# listening socket open, and which ignores SIGTERM: /proc/PID/stat shows
# the zombie main thread ("Z"), yet the port still accepts connections.
ZOMBIE_LEADER = textwrap.dedent("""
    import ctypes, signal, socket, sys, threading, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(sys.argv[1])))
    server.listen(8)
    def serve():
        while True:
            server.accept()[0].close()
    threading.Thread(target=serve).start()
    time.sleep(0.2)
    ctypes.CDLL(None, use_errno=True).syscall(int(sys.argv[2]), 0)
""")


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.skipif(SYS_EXIT is None, reason=f"no exit system call number known for {platform.machine()}")
def test_a_zombie_main_thread_with_a_live_server_thread_is_not_stopped(tmp_path):
    port = free_port()
    argv = [sys.executable, "-c", ZOMBIE_LEADER, str(port), str(SYS_EXIT)]
    _process.start(tmp_path, ROOT, "zombie", argv, "127.0.0.1", port, "test server")
    pid = json.loads((tmp_path / "zombie.pid").read_text())["pid"]
    # Wait until the main thread really is a zombie, with a deadline.
    assert _process._wait(lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", 10)
    assert _process.listening("127.0.0.1", port), "the server thread must still serve"
    assert _process._alive(pid), "a process with a running thread is alive, whatever its main thread says"

    # It ignores SIGTERM, so only SIGKILL after the grace period ends it.
    assert _process.stop(tmp_path, "zombie", grace=0.5) is True
    assert refused(port)
    assert not _process._alive(pid)
    assert not (tmp_path / "zombie.pid").exists()


def test_stop_leaves_a_recycled_pid_alone(tmp_path):
    # The pid file names a process that has ended; the pid now belongs to a
    # process with another start time (here: this test's own process).
    record = {"pid": os.getpid(), "start_time": "1", "host": "127.0.0.1", "port": free_port()}
    (tmp_path / "emulator.pid").write_text(json.dumps(record))
    assert _process.stop(tmp_path, "emulator") is False
    assert not (tmp_path / "emulator.pid").exists()


def test_stop_reads_a_pid_file_of_an_older_gpufleet(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (tmp_path / "emulator.pid").write_text(f"{proc.pid}\n")
    assert _process.stop(tmp_path, "emulator") is True
    assert proc.poll() is not None


class LoopbackPodman(FakePodman):
    """Fake nodes; the object store then listens on loopback, not on
    podman's bridge."""

    def bridge_gateway(self):
        return "127.0.0.1"


def test_twenty_downs_and_ups_back_to_back_never_find_the_port_taken(tmp_path, monkeypatch):
    # Real emulator and object-store processes on their own ports; only the
    # nodes are fake, so each cycle takes about a second.
    monkeypatch.setattr(_ssh, "wait_for_banner", lambda node, timeout: None)
    emulator_port, store_port = free_port(), free_port()
    emulator = SimpleNamespace(start=lambda d, root, nodes: _emulator.start(d, root, nodes, port=emulator_port),
                               stop=_emulator.stop)
    store = SimpleNamespace(start=lambda d, root, gateway: _object_store.start(d, root, gateway, port=store_port),
                            stop=_object_store.stop, delete_data=_object_store.delete_data)
    lab = Lab(tmp_path / "lab", podman=LoopbackPodman(), root=ROOT, emulator=emulator, object_store=store)
    lab.dir.mkdir()
    try:
        for cycle in range(20):
            lab.down(log=lambda *_: None)
            assert refused(emulator_port) and refused(store_port), f"cycle {cycle}: a port is still open after down"
            lab.up(count=1, log=lambda *_: None)
            assert _process.listening("127.0.0.1", emulator_port), f"cycle {cycle}"
            assert _process.listening("127.0.0.1", store_port), f"cycle {cycle}"
    finally:
        lab.down(log=lambda *_: None)
    assert refused(emulator_port) and refused(store_port)
