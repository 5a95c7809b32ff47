"""The lab fleet's plan: which nodes exist and where each one listens.

Every node gets its own loopback address and its own published SSH port, so
nothing ever targets podman's bridge network and several nodes never share a
socket. Pure functions: no podman, no files.
"""

from __future__ import annotations

import dataclasses
import ipaddress

NAME_PREFIX = "gpufleet-lab-"
LABEL = "gpufleet.lab"
FIRST_OCTET = 10  # node 1 is 127.0.0.11
FIRST_PORT = 2200  # node 1 listens on port 2201
MAX_NODES = 200
IMAGES = {"12": "localhost/gpufleet-debian:12", "13": "localhost/gpufleet-debian:13"}
# GPU-stack nodes run Debian 13: the GPU roles' "distro" sources need its
# NCCL (Debian 12 ships none).
GPU_STACK_DEBIAN = "13"


@dataclasses.dataclass(frozen=True)
class Node:
    index: int
    name: str
    hostname: str
    address: str
    port: int
    # A node that takes site.yml's GPU stack (driver, CUDA, NCCL, Docker)
    # from Debian's packages: privileged, because Docker needs it.
    gpu_stack: bool = False
    # Listed by the lab's cloud as a spot instance (gpufleet_spot), so
    # site.yml's guard watches for its notice.
    spot: bool = False

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.port}"


def plan(count: int, gpu_stack: int = 0, spot: int = 0) -> list[Node]:
    """The nodes of a lab of `count` nodes, numbered from 1: the first
    `gpu_stack` of them are GPU-stack nodes, the last `spot` of them spot
    instances. A larger lab keeps the nodes of a smaller one with the same
    `gpu_stack` and adds plain nodes."""
    if not isinstance(count, int) or isinstance(count, bool):
        raise ValueError(f"nodes: expected a whole number, got {count!r}")
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"nodes: must be between 1 and {MAX_NODES}, got {count}")
    for option, value in (("gpu_stack", gpu_stack), ("spot", spot)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= count:
            raise ValueError(f"{option}: must be a whole number between 0 and the node count {count}, got {value!r}")
    return [node(i, gpu_stack=i <= gpu_stack, spot=i > count - spot) for i in range(1, count + 1)]


def node(index: int, gpu_stack: bool = False, spot: bool = False) -> Node:
    address = str(ipaddress.IPv4Address("127.0.0.0") + FIRST_OCTET + index)
    return Node(
        index=index,
        name=f"{NAME_PREFIX}{index}",
        hostname=f"lab-node-{index}",
        address=address,
        port=FIRST_PORT + index,
        gpu_stack=gpu_stack,
        spot=spot,
    )


def index_of(container_name: str) -> int | None:
    """The node index encoded in a lab container's name, or None."""
    if not container_name.startswith(NAME_PREFIX):
        return None
    tail = container_name[len(NAME_PREFIX):]
    return int(tail) if tail.isdigit() else None


def image_for(debian: str, gpu_stack: bool = False) -> str:
    if gpu_stack:
        return IMAGES[GPU_STACK_DEBIAN]
    try:
        return IMAGES[str(debian)]
    except KeyError:
        raise ValueError(f"debian: must be one of {', '.join(sorted(IMAGES))}, got {debian!r}") from None
