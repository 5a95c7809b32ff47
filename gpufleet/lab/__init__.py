"""The lab fleet: local systemd nodes in podman, reached over real SSH.

`gpufleet lab up` makes the nodes (default 3), each with sshd published on
its own loopback address and port, a `gpufleet` user with passwordless sudo,
the lab's SSH key, a `trainer` user without sudo (the job's account, which
the GPU-stack nodes' docker_users names), and a known_hosts file. `inventories/lab` reaches them
from a checkout; `<lab dir>/inventory`, which `lab up` writes from the
collection's inventories/lab (_inventory.py), from anywhere.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from . import _emulator, _inventory, _nodes, _object_store, _ssh
from ._nodes import Node
from ._podman import Podman, PodmanError

__all__ = ["Lab", "PodmanError"]

LAB_USER = "gpufleet"
# runc's answer to `podman exec` when the node's cgroup is gone.
_CGROUP_GONE = re.compile(r"error adding pid \d+ to cgroups")
# Runs inside a node; the public key arrives on stdin, nothing is interpolated.
_PROVISION = """set -eu
id -u gpufleet >/dev/null 2>&1 || useradd --create-home --shell /bin/bash gpufleet
id -u trainer >/dev/null 2>&1 || useradd --create-home --shell /bin/bash trainer
install -d -m 0700 -o gpufleet -g gpufleet /home/gpufleet/.ssh
cat > /home/gpufleet/.ssh/authorized_keys
chown gpufleet:gpufleet /home/gpufleet/.ssh/authorized_keys
chmod 0600 /home/gpufleet/.ssh/authorized_keys
echo 'gpufleet ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/gpufleet-lab
chmod 0440 /etc/sudoers.d/gpufleet-lab
"""


class Lab:
    def __init__(self, lab_dir: Path, podman: Podman | None = None, root: Path | None = None,
                 emulator=_emulator, object_store=_object_store, inventory_source: Path | None = None):
        self.dir = Path(lab_dir)
        self.podman = podman or Podman()
        # The working directory of the lab's servers.
        self.root = Path(root) if root else self.dir.parent
        # The collection's inventories/lab, which `up` copies into the lab
        # directory; None: write none (inventories/lab alone reaches it).
        self.inventory_source = Path(inventory_source) if inventory_source else None
        self.emulator = emulator
        self.object_store = object_store

    @property
    def state_file(self) -> Path:
        return self.dir / "nodes.json"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    def up(self, count: int = 3, debian: str = "12", gpu_stack: int = 0, boot_timeout: float = 90.0,
           log=print, spot: int = 0) -> list[Node]:
        """Bring the lab to exactly `count` running nodes, the first
        `gpu_stack` of them GPU-stack nodes, the last `spot` of them spot
        instances in the lab's cloud; safe to repeat."""
        nodes = _nodes.plan(count, gpu_stack, spot)
        images = {n.name: _nodes.image_for(debian, n.gpu_stack) for n in nodes}
        for image in sorted(set(images.values())):
            if not self.podman.image_exists(image):
                raise PodmanError(f"image {image} is missing: run `make images` first")
        pubkey = _ssh.ensure_key(self.dir).with_suffix(".pub").read_text()

        existing = self.podman.lab_containers()
        made_for_gpu_stack = self.podman.gpu_stack_containers()
        wanted = {n.name: n for n in nodes}
        for name in sorted(existing):
            # A smaller lab than last time, or a node made for the other role.
            if name not in wanted or (name in made_for_gpu_stack) != wanted[name].gpu_stack:
                log(f"removing {name}")
                self.podman.remove(name)
                del existing[name]
        for n in nodes:
            state = existing.get(n.name)
            if state is None:
                log(f"starting {n.name} on {n.endpoint}{' (GPU stack)' if n.gpu_stack else ''}"
                    f"{' (spot)' if n.spot else ''}")
                self.podman.run_node(n, images[n.name])
            elif state != "running":
                log(f"restarting {n.name}")
                self.podman.start(n.name)

        lines = []
        for n in nodes:
            self._wait_booted(n, boot_timeout, log)
            self.podman.exec(n.name, "sh", "-c", _PROVISION, stdin=pubkey)
            host_key = self.podman.exec(n.name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout
            lines.append(_ssh.known_hosts_line(n, host_key))
            _ssh.wait_for_banner(n, timeout=boot_timeout)
        self.known_hosts.write_text("\n".join(lines) + "\n")
        self.emulator.start(self.dir, self.root, nodes)
        inventory = _inventory.write(self.dir, self.inventory_source) if self.inventory_source else None
        gateway = self.podman.bridge_gateway()
        restored = self.object_store.start(self.dir, self.root, gateway)
        self.state_file.write_text(
            json.dumps({"images": images, "user": LAB_USER, "nodes": [vars(n) for n in nodes]}, indent=2) + "\n"
        )
        log(f"lab up: {len(nodes)} node(s), key {self.dir / 'id_ed25519'}, "
            f"Alibaba Cloud emulator on 127.0.0.1:{_emulator.PORT}, "
            f"object store (S3) on {gateway}:{_object_store.PORT}"
            + (f", its data restored ({restored} stored changes)" if restored else "")
            + (f"; inventory {inventory}" if inventory else ""))
        return nodes

    def _wait_booted(self, n: Node, timeout: float, log=print) -> None:
        deadline = time.monotonic() + timeout
        state, active, why = "unknown", "unknown", ""
        restarted = False
        while time.monotonic() < deadline:
            probe = self.podman.exec(n.name, "systemctl", "is-system-running", check=False)
            state = probe.stdout.strip()
            # An empty state is systemctl (or podman exec) failing: keep why.
            why = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ""
            if not restarted and _CGROUP_GONE.search(probe.stderr):
                # Podman has the node running, but its cgroup is gone, so no
                # command can run in it (seen on cgroup v1 after a node was
                # stopped and started): only a new run of it has one again.
                # Its disk is kept.
                log(f"restarting {n.name}: podman cannot run commands in it ({why})")
                self.podman.restart(n.name)
                restarted = True
                continue
            active = self.podman.exec(n.name, "systemctl", "is-active", "ssh", check=False).stdout.strip()
            if state in ("running", "degraded") and active == "active":
                return
            time.sleep(0.5)
        raise TimeoutError(f"{n.name}: not booted with sshd active after {timeout:.0f}s (system state "
                           f"{state or 'none'}, ssh {active or 'none'}{'; ' + why if why else ''}); "
                           f"look at `podman exec {n.name} systemctl list-jobs` and `podman logs {n.name}`")

    def down(self, log=print) -> int:
        """Remove every lab node; keep the key so known setups stay valid."""
        names = sorted(self.podman.lab_containers())
        failed = []
        for name in names:
            log(f"removing {name}")
            try:
                self.podman.remove(name)
            except PodmanError as error:
                failed.append(str(error))
        # The emulator and the object store stop even when a node stayed:
        # left running, they hold the lab's ports, and the next `lab up`
        # (of this checkout or another) fails on them.
        self.emulator.stop(self.dir)
        self.object_store.stop(self.dir)
        if failed:
            # The data and the state stay, so `lab down` again finishes.
            raise PodmanError("; ".join(failed) + "; the emulator and object store are stopped;"
                              " run `gpufleet lab down` again to remove what is left")
        # The object store's data lives as long as the lab: `lab up` and
        # restarts keep it, only this deletes it.
        deleted = self.object_store.delete_data(self.dir)
        for f in (self.known_hosts, self.state_file):
            f.unlink(missing_ok=True)
        # Its hosts are gone; the key it names stays, as above.
        shutil.rmtree(_inventory.path(self.dir), ignore_errors=True)
        log(f"lab down: removed {len(names)} node(s)"
            + (f" and the object store's data ({_object_store.data_file(self.dir)})" if deleted else ""))
        return len(names)

    def status(self) -> list[dict]:
        """One row per lab container: name, endpoint, container state, ssh."""
        rows = []
        for name, state in sorted(self.podman.lab_containers().items(), key=lambda kv: _nodes.index_of(kv[0]) or 0):
            index = _nodes.index_of(name)
            n = _nodes.node(index) if index else None
            ssh = "-"
            if n and state == "running":
                try:
                    _ssh.wait_for_banner(n, timeout=2)
                    ssh = "up"
                except TimeoutError:
                    ssh = "down"
            rows.append({"name": name, "endpoint": n.endpoint if n else "?", "state": state, "ssh": ssh})
        return rows
