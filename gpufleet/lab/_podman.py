"""The few podman calls the lab needs, through one injectable runner so the
lab logic is testable without podman."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence

from ._nodes import LABEL, Node

GPU_STACK_LABEL = f"{LABEL}.gpu-stack"

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


class PodmanError(RuntimeError):
    pass


def default_runner(argv: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


class Podman:
    def __init__(self, runner: Runner = default_runner):
        self._run = runner

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
        if stdin is None:
            return self._call("exec", name, *argv, check=check)
        # Pass data on stdin rather than interpolating it into a shell line.
        result = subprocess.run(
            ["podman", "exec", "-i", name, *argv], input=stdin, capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            raise PodmanError(f"podman exec {name} {argv[0]} failed: {result.stderr.strip()}")
        return result
