"""The few podman calls the lab needs, through one injectable runner so the
lab logic is testable without podman."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence

from ._nodes import LABEL, Node

GPU_STACK_LABEL = f"{LABEL}.gpu-stack"

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]

# runc's answer to `podman exec` when the node's directory in one cgroup v1
# hierarchy is gone while the node runs: the directory it could not join.
# CI saw it for name=systemd on a GPU-stack node, with the node's systemd
# and sshd still serving; the cause is not known.
_CGROUP_DIR_GONE = re.compile(r"\bopen(?:at2)? (/sys/fs/cgroup/\S+)/cgroup\.procs: no such file")
# One per cgroup v1 hierarchy at most (the host has ten).
_CGROUP_REPAIRS = 12


def missing_cgroup_dir(stderr: str) -> str | None:
    """The cgroup directory a failed `podman exec` could not join, or None
    when it failed for another reason."""
    match = _CGROUP_DIR_GONE.search(stderr)
    return match[1] if match and ".." not in match[1].split("/") else None


class PodmanError(RuntimeError):
    pass


def default_runner(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


class Podman:
    def __init__(self, runner: Runner = default_runner, make_dir: Callable[[str], None] | None = None,
                 warn: Callable[[str], None] | None = None):
        self._run = runner
        self._make_dir = make_dir or (lambda path: os.makedirs(path, exist_ok=True))
        self._warn = warn or (lambda line: print(line, file=sys.stderr))

    def _call(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = self._run(["podman", *args])
        if check and result.returncode != 0:
            raise PodmanError(f"podman {' '.join(args[:2])} failed: {result.stderr.strip() or result.stdout.strip()}")
        return result

    def lab_containers(self) -> dict[str, str]:
        """Name -> state ('running', 'exited', ...) of every lab container."""
        out = self._call("ps", "--all", "--filter", f"label={LABEL}", "--format", "json").stdout
        return {c["Names"][0]: c["State"] for c in json.loads(out or "[]")}

    def gpu_stack_containers(self) -> set[str]:
        """Names of the lab containers made as GPU-stack nodes."""
        out = self._call("ps", "--all", "--filter", f"label={GPU_STACK_LABEL}=1", "--format", "json").stdout
        return {c["Names"][0] for c in json.loads(out or "[]")}

    def bridge_gateway(self) -> str:
        """The host's address on podman's default network, where the nodes
        reach servers the lab runs on the host."""
        out = self._call("network", "inspect", "podman", "--format", "json").stdout
        return json.loads(out)[0]["subnets"][0]["gateway"]

    def image_exists(self, image: str) -> bool:
        return self._call("image", "exists", image, check=False).returncode == 0

    def run_node(self, node: Node, image: str) -> None:
        if node.gpu_stack:
            # Docker in a node (docs/testing.md, "Test nodes"): a
            # privileged node with its own cgroup namespace (or nested
            # containers fail on the cgroup mount), and a tmpfs data root
            # (overlay2 cannot stack on the node's own overlay).
            access = ["--label", f"{GPU_STACK_LABEL}=1", "--privileged", "--cgroupns=private",
                      "--tmpfs=/var/lib/docker:rw,exec,size=4g"]
        else:
            # The security role loads nftables rules (NET_ADMIN), and reads
            # what its file would load in a throwaway network namespace
            # (SYS_ADMIN, for unshare): both act only in the node's own
            # namespaces, never on the host's firewall.
            access = ["--cap-add", "NET_ADMIN", "--cap-add", "SYS_ADMIN"]
        self._call(
            "run", "--detach",
            "--name", node.name,
            "--hostname", node.hostname,
            "--label", f"{LABEL}=1",
            "--label", f"{LABEL}.index={node.index}",
            # Only the node's own loopback address and port, never 0.0.0.0.
            "--publish", f"{node.address}:{node.port}:22",
            *access,
            image, "/sbin/init",
        )

    def start(self, name: str) -> None:
        self._call("start", name)

    def restart(self, name: str) -> None:
        """Stop, clean up and start: podman's own cleanup of the stopped
        run (its cgroup, its mounts) is done before the new run starts."""
        self._call("stop", "--time", "2", name)
        self._call("container", "cleanup", name, check=False)
        self._call("start", name)

    def remove(self, name: str, attempts: int = 3) -> None:
        """podman rm --force, again while the container is still there. A
        node that exits on its own while podman stops it fails that rm
        ("container state improper: stopped", seen in a CI run's `lab
        down`); an rm of the container now stopped then works."""
        for _attempt in range(attempts):
            result = self._call("rm", "--force", "--time", "2", name, check=False)
            if result.returncode == 0 or not self.exists(name):
                return
        raise PodmanError(f"podman rm --force {name} failed {attempts} times: "
                          f"{result.stderr.strip() or result.stdout.strip()}")

    def exists(self, name: str) -> bool:
        return self._call("container", "exists", name, check=False).returncode == 0

    def exec(self, name: str, *argv: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        """`podman exec`; data on stdin rather than interpolated into a
        shell line. A node whose cgroup directory is gone runs no command:
        the directory is made again (an empty cgroup the command joins) and
        the command run again, saying so on stderr."""
        made: set[str] = set()
        for _repair in range(_CGROUP_REPAIRS + 1):
            if stdin is None:
                result = self._run(["podman", "exec", name, *argv])
            else:
                result = subprocess.run(
                    ["podman", "exec", "-i", name, *argv], input=stdin, capture_output=True, text=True, check=False
                )
            missing = missing_cgroup_dir(result.stderr) if result.returncode != 0 else None
            if missing is None or missing in made:
                break
            made.add(missing)
            self._warn(f"podman exec {name}: its cgroup directory {missing} is gone; made it again")
            self._make_dir(missing)
        if check and result.returncode != 0:
            raise PodmanError(f"podman exec {name} {argv[0]} failed: {result.stderr.strip() or result.stdout.strip()}")
        return result
