"""testinfra's podman backend through one `podman exec` per node, not one
per command.

testinfra's own backend runs every check as `podman exec NODE /bin/sh -c
CMD`, through a local shell: about 0.07 s of CPU and 0.15 s of wall each
(docs/testing.md, "What a podman node costs"), and a scenario's verify runs
a hundred or more. This one starts a small Python server on the node once
(`podman exec --interactive NODE python3`) and sends it each command: the
server runs it with /bin/sh, as podman exec does (same user, environment,
working directory and no stdin), and answers with its exit status, stdout
and stderr. Output goes to files, not pipes, so a command that leaves a
process in the background returns when the command does. A command that
gets no answer (the node was restarted, say, and the server with it) is
sent once more to a new server, so one that ended the server itself runs
twice; if the new one does not answer either, the command runs as
testinfra runs it.

`use()` puts it in place of testinfra's podman backend for every
`podman://` host made after the call; extensions/molecule/conftest.py calls
it.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from typing import Any

from testinfra.backend import BACKENDS, base

from tests.support.nodes import PODMAN_PYTHON

SERVER = r"""
import base64, json, subprocess, sys, tempfile
for line in sys.stdin:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        rc = subprocess.call(base64.b64decode(line), shell=True, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        out.seek(0)
        err.seek(0)
        answer = [rc, base64.b64encode(out.read()).decode(), base64.b64encode(err.read()).decode()]
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


class PersistentPodmanBackend(base.BaseBackend):
    """A `podman://NODE` (or `podman://USER@NODE`) host whose commands go
    to one server process on the node."""

    NAME = "podman"

    def __init__(self, name: str, *args: Any, **kwargs: Any):
        self.name, self.user = self.parse_containerspec(name)
        super().__init__(self.name, *args, **kwargs)
        self._server: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        user = ["--user", self.user] if self.user else []
        return subprocess.Popen(["podman", "exec", "--interactive", *user, self.name, PODMAN_PYTHON, "-u", "-c", SERVER],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def _ask(self, command: bytes) -> list | None:
        if self._server is None or self._server.poll() is not None:
            self._server = self._start()
        try:
            self._server.stdin.write(base64.b64encode(command) + b"\n")
            self._server.stdin.flush()
            line = self._server.stdout.readline()
        except (BrokenPipeError, OSError):
            line = b""
        return json.loads(line) if line else None

    def run(self, command: str, *args: str, **kwargs: Any) -> base.CommandResult:
        text = self.get_command(command, *args)
        cmd = self.encode(text)
        with self._lock:
            answer = self._ask(cmd)
            if answer is None:  # the server died (a restarted node): once more with a new one
                self._server = None
                answer = self._ask(cmd)
        if answer is None:
            # No server on the node (stopped, say): testinfra's own way, whose
            # result says what podman says.
            user = f"--user {self.user} " if self.user else ""
            result = self.run_local(f"podman exec {user}%s /bin/sh -c %s", self.name, text)
            result.command = cmd
            return result
        rc, out, err = answer
        return self.result(rc, cmd, base64.b64decode(out), base64.b64decode(err))

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.stdin.close()
            self._server.wait(timeout=10)
        self._server = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pylint: disable=broad-exception-caught  # interpreter shutdown
            pass


def use() -> None:
    """Make `podman://` hosts use PersistentPodmanBackend."""
    BACKENDS["podman"] = f"{__name__}.PersistentPodmanBackend"
