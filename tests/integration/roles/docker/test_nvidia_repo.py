"""The docker role on a node whose driver runs GPUs, with the container
toolkit from its default source, NVIDIA's own URL
(https://nvidia.github.io/libnvidia-container), answered by the local copy of
NVIDIA's repository (tests/emulators/nvidia_repos.py) on the node's loopback.

These machines have no GPU. The node gets what the roles read to count a
driver's GPUs (gpu_facts, node_facts): /dev/nvidiactl, the device node the
driver makes (195, 255; nothing opens it here), and
/proc/driver/nvidia/gpus/<PCI address>, on a tmpfs here. The copy's
nvidia-ctk reads the same list, as the real one asks NVML. With GPUs found,
docker_nvidia=auto turns the toolkit on: the runtime in daemon.json, and a
CDI spec that names each GPU and follows the GPUs the driver runs.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.conftest import node_container
from tests.integration.nvidia_repos_node import installed, serve_nvidia_repos
from tests.support.nodes import node_exec, recap, run_roles

pytestmark = pytest.mark.lab

GPUS = ["0000:19:00.0", "0000:3b:00.0"]
SPEC = "/etc/cdi/nvidia.yaml"


@pytest.fixture(scope="module")
def gpu_node(tmp_path_factory):
    # Docker in a node: privileged, its own cgroup namespace and a tmpfs data
    # root, as the docker Molecule scenario does (docs/testing.md, "Test nodes").
    with node_container(
        "--privileged", "--cgroupns=private", "--tmpfs=/var/lib/docker:rw,exec,size=4g",
        "--mount", "type=tmpfs,destination=/proc/driver",
    ) as name:
        # A privileged node's /dev is its own: podman's --device does not
        # reach it, mknod does.
        assert node_exec(name, "mknod", "-m", "0666", "/dev/nvidiactl", "c", "195", "255").returncode == 0
        add_gpus(name, GPUS)
        manifest = serve_nvidia_repos(name, tmp_path_factory.mktemp("serve"), as_nvidia=True)
        yield name, manifest["keys"]["libnvidia-container"]["fingerprint"]


def add_gpus(node: str, addresses: list[str]) -> None:
    for address in addresses:
        assert node_exec(node, "mkdir", "-p", f"/proc/driver/nvidia/gpus/{address}").returncode == 0


def converge(gpu_node, tmp_path, *, check=False):
    node, fingerprint = gpu_node
    # docker_nvidia and the toolkit's URLs are the defaults; only the key is the copy's.
    extra_vars = {"docker_nvidia_repo_key_fingerprints": [fingerprint]}
    result = run_roles(node, tmp_path, ["gpufleet.cloud.docker"], extra_vars, check=check, diff=check)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    return result, recap(result.stdout)[node]["changed"]


def spec_devices(node: str) -> list[str]:
    spec = node_exec(node, "cat", SPEC).stdout
    assert "kind: nvidia.com/gpu" in spec
    return re.findall(r"^  name: \"?([^\"\s]+)\"?$", spec, re.M)


def test_gpus_found_turn_the_toolkit_on_and_the_cdi_spec_follows_them(gpu_node, tmp_path):
    node = gpu_node[0]
    assert converge(gpu_node, tmp_path, check=True)[1] > 0
    assert "nvidia-container-toolkit" not in installed(node), "check mode installed the toolkit"

    assert converge(gpu_node, tmp_path)[1] > 0
    packages = installed(node)
    assert packages.get("nvidia-container-toolkit") == "1.18.0-1"
    sources = node_exec(node, "cat", "/etc/apt/sources.list.d/gpufleet-nvidia-container-toolkit.sources").stdout
    assert "URIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64" in sources
    daemon = json.loads(node_exec(node, "cat", "/etc/docker/daemon.json").stdout)
    assert daemon["default-runtime"] == "nvidia"
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert daemon["features"]["cdi"] is True
    # What the engine runs, not only what was written.
    info = json.loads(node_exec(node, "docker", "info", "--format", "{{json .}}").stdout)
    assert info["DefaultRuntime"] == "nvidia" and "nvidia" in info["Runtimes"]
    assert spec_devices(node) == ["0", "1", "all"]

    assert converge(gpu_node, tmp_path)[1] == 0
    assert converge(gpu_node, tmp_path, check=True)[1] == 0

    # A GPU the driver now runs (a board replaced, a GPU back from a
    # reset): check mode shows the spec that would change, and a run
    # writes it.
    add_gpus(node, ["0000:5d:00.0"])
    result, changed = converge(gpu_node, tmp_path, check=True)
    assert changed > 0 and "/dev/nvidia2" in result.stdout
    assert spec_devices(node) == ["0", "1", "all"], "check mode wrote the spec"
    assert converge(gpu_node, tmp_path)[1] > 0
    assert spec_devices(node) == ["0", "1", "2", "all"]
