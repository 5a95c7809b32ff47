"""tests/support/testinfra_podman.py: the server answers each command as
`podman exec NODE /bin/sh -c` would (exit status, stdout and stderr as
bytes), returns while a command's background child still runs, and a dead
server is replaced; with none to be had, the command runs the old way.
The server runs here as a local process in place of `podman exec`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("testinfra")

from testinfra.backend import BACKENDS  # noqa: E402

from tests.support import testinfra_podman  # noqa: E402


@pytest.fixture
def backend(monkeypatch):
    starts = []

    def start(self):
        starts.append(self.name)
        return subprocess.Popen([sys.executable, "-u", "-c", testinfra_podman.SERVER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    monkeypatch.setattr(testinfra_podman.PersistentPodmanBackend, "_start", start)
    node = testinfra_podman.PersistentPodmanBackend("node-1")
    node.starts = starts
    yield node
    node.close()


def test_status_and_both_streams_come_back_as_the_command_left_them(backend):
    result = backend.run("printf 'out\\n\\377'; printf err >&2; exit 3")
    assert (result.rc, result.stdout_bytes, result.stderr_bytes) == (3, b"out\n\xff", b"err")
    assert backend.run("test -e %s", "/nonexistent path").rc == 1
    assert backend.run("cat").stdout == ""  # no stdin to wait on
    assert backend.starts == ["node-1"], "one server for every command"


def test_a_command_that_leaves_a_background_child_returns(backend):
    child = int(backend.run("sleep 300 & echo $!").stdout)
    try:
        os.kill(child, 0)  # answered while the child still runs
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_dead_server_is_replaced(backend):
    backend.run("true")
    backend._server.kill()  # pylint: disable=protected-access
    backend._server.wait()  # pylint: disable=protected-access
    assert backend.run("echo again").stdout == "again\n"
    assert backend.starts == ["node-1", "node-1"]


def test_without_a_server_the_command_runs_the_old_way(monkeypatch):
    monkeypatch.setattr(testinfra_podman.PersistentPodmanBackend, "_start",
                        lambda self: subprocess.Popen(["false"], stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    ran = []
    monkeypatch.setattr(testinfra_podman.PersistentPodmanBackend, "run_local",
                        lambda self, command, *args: ran.append(command % args) or self.result(125, b"", b"", b"gone"))
    node = testinfra_podman.PersistentPodmanBackend("node-1")
    result = node.run("echo %s", "x")
    assert result.rc == 125 and result.stderr == "gone"
    assert ran == ["podman exec node-1 /bin/sh -c echo x"]


def test_use_puts_it_in_place_of_testinfras_podman_backend(monkeypatch):
    monkeypatch.setitem(BACKENDS, "podman", BACKENDS["podman"])
    testinfra_podman.use()
    assert BACKENDS["podman"] == "tests.support.testinfra_podman.PersistentPodmanBackend"
