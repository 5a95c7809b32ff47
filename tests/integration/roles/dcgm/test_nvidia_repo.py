"""DCGM's host engine from NVIDIA's repository (dcgm_hostengine_enabled):
first from the default source, cuda_repo, answered at NVIDIA's own URL by
the local copy of NVIDIA's repository (tests/emulators/nvidia_repos.py),
then from the same copy as a mirror, moving DCGM's version and its CUDA
package at once. The host engine must run the pinned version (a version
change restarts it), a stopped engine is drift that a run repairs, and
what the repository lacks is refused before anything changes.
"""

from __future__ import annotations

import pytest

from tests.integration.nvidia_repos_node import CUDA_MIRROR, held, installed, serve_nvidia_repos
from tests.integration.roles.bad_input import assert_case_refused, run_cases
from tests.support.nodes import node_exec, recap, run_roles
from tests.support.ports import REFUSED_URL

pytestmark = pytest.mark.lab

CORE = "datacenter-gpu-manager-4-core"
# Asks the engine on its port; the copy's stand-in answers with its version.
ASK_ENGINE = ("import socket; s = socket.create_connection(('127.0.0.1', 5555), timeout=5); "
              "print(s.recv(200).decode().strip())")


@pytest.fixture(scope="module")
def repo_node(fresh_node, tmp_path_factory):
    manifest = serve_nvidia_repos(fresh_node, tmp_path_factory.mktemp("serve"), as_nvidia=True)
    return fresh_node, manifest["keys"]["cuda"]["fingerprint"]


def dcgm_vars(fingerprint, **extra):
    return {
        # Only the host engine: dcgm-exporter needs a GPU.
        "gpufleet_gpu_exporter": "none",
        "dcgm_hostengine_enabled": True,
        "dcgm_repo_key_fingerprints": [fingerprint],
        "dcgm_version": "4.2.3",
        # No driver on this node to tell the CUDA major.
        "dcgm_cuda_major": 12,
        **extra,
    }


def converge(repo_node, tmp_path, *, check=False, **extra):
    node, fingerprint = repo_node
    return run_roles(node, tmp_path, ["gpufleet.cloud.dcgm"], dcgm_vars(fingerprint, **extra), check=check)


def assert_ok(result, node, *, changed: bool):
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    stats = recap(result.stdout)[node]
    assert (stats["changed"] > 0) == changed, result.stdout[-5000:]


def engine_answer(node: str) -> str:
    return node_exec(node, "python3", "-c", ASK_ENGINE).stdout.strip()


def assert_dcgm(node: str, version: str, cuda: str, source_url: str):
    packages = installed(node)
    assert packages.get(CORE) == version
    assert packages.get(f"datacenter-gpu-manager-4-cuda{cuda}") == version
    other = {"12": "13", "13": "12"}[cuda]
    assert f"datacenter-gpu-manager-4-cuda{other}" not in packages, "the replaced CUDA package stayed"
    assert {CORE, f"datacenter-gpu-manager-4-cuda{cuda}"} <= held(node)
    assert node_exec(node, "systemctl", "is-enabled", "nvidia-dcgm").stdout.strip() == "enabled"
    # The running engine is the pinned version, not the one it started as.
    assert engine_answer(node) == f"gpufleet test stand-in DCGM {version}"
    sources = node_exec(node, "cat", "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").stdout
    assert f"URIs: {source_url}/debian12/x86_64/" in sources


def test_dcgm_from_nvidias_url_then_from_a_mirror(repo_node, tmp_path):
    node = repo_node[0]
    fresh = converge(repo_node, tmp_path, check=True)
    assert_ok(fresh, node, changed=True)
    assert CORE not in installed(node), "check mode installed DCGM"

    assert_ok(converge(repo_node, tmp_path), node, changed=True)
    assert_dcgm(node, "1:4.2.3-1", "12", "https://developer.download.nvidia.com/compute/cuda/repos")
    assert_ok(converge(repo_node, tmp_path), node, changed=False)
    assert_ok(converge(repo_node, tmp_path, check=True), node, changed=False)

    # What the node runs, not what was written: a stopped engine is drift.
    node_exec(node, "systemctl", "stop", "nvidia-dcgm")
    assert_ok(converge(repo_node, tmp_path, check=True), node, changed=True)
    assert node_exec(node, "systemctl", "is-active", "nvidia-dcgm").stdout.strip() != "active"

    moved = {"dcgm_source": "mirror", "dcgm_mirror_url": CUDA_MIRROR,
             "dcgm_version": "4.4.1-1", "dcgm_cuda_major": 13}
    assert_ok(converge(repo_node, tmp_path, check=True, **moved), node, changed=True)
    assert installed(node)[CORE] == "1:4.2.3-1", "check mode moved DCGM"
    assert_ok(converge(repo_node, tmp_path, **moved), node, changed=True)
    assert_dcgm(node, "1:4.4.1-1", "13", CUDA_MIRROR)
    assert_ok(converge(repo_node, tmp_path, **moved), node, changed=False)
    assert_ok(converge(repo_node, tmp_path, check=True, **moved), node, changed=False)


# Each case: (what it changes, the variable its refusal names, what the
# refusal says). All run in one ansible-playbook run (../bad_input.py), each
# case its own alias of the node, after the moves above.
BAD = {
    "version the repository lacks": ({"dcgm_version": "4.9.9"},
                                     "dcgm_version/dcgm_cuda_major", "has no version 1:4.9.9-*"),
    "CUDA package the repository lacks": ({"dcgm_cuda_major": 11},
                                          "dcgm_version/dcgm_cuda_major",
                                          "datacenter-gpu-manager-4-cuda11 is not in it"),
    "key not pinned": ({"dcgm_repo_key_fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]},
                       "dcgm_repo_key_fingerprints", "which is not pinned"),
    # Nothing listens on port 9 of the node's loopback.
    "unreachable mirror": ({"dcgm_source": "mirror", "dcgm_mirror_url": f"{REFUSED_URL}/cuda"},
                           "dcgm_mirror_url", REFUSED_URL.removeprefix("http://")),
    "mirror without a URL": ({"dcgm_source": "mirror"}, "dcgm_mirror_url",
                             "http(s) base URL of the mirror"),
    "no driver to tell the CUDA major": ({"dcgm_cuda_major": 0}, "dcgm_cuda_major",
                                         "no NVIDIA driver answers"),
    "negative CUDA major": ({"dcgm_cuda_major": -12}, "dcgm_cuda_major", "(got -12)"),
    "version with its epoch": ({"dcgm_version": "1:4.4.1-1"}, "dcgm_version", "without the epoch"),
    # dcgm-exporter's inputs, checked wherever the fleet's GPU exporter is dcgm.
    "dcgm-exporter not pinned": ({"gpufleet_gpu_exporter": "dcgm", "dcgm_exporter_version": "latest"},
                                 "dcgm_exporter_version", "never 'latest'"),
    # TEST-NET-3: never an address of a test node.
    "dcgm-exporter address not on the node": ({"gpufleet_gpu_exporter": "dcgm", "dcgm_exporter_address": "203.0.113.9"},
                                              "dcgm_exporter_address", "is not an address of"),
    "dcgm-exporter image with its tag": ({"gpufleet_gpu_exporter": "dcgm",
                                          "dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter:latest"},
                                         "dcgm_exporter_image", "a repository without tag"),
    "dcgm-exporter port out of range": ({"dcgm_exporter_port": 70000}, "dcgm_exporter_port", "1 to 65535"),
    "unknown GPU exporter": ({"gpufleet_gpu_exporter": "nvml"}, "gpufleet_gpu_exporter", "must be one of nvidia_smi, dcgm, none"),
}


@pytest.fixture(scope="module")
def bad_runs(repo_node, tmp_path_factory):
    node, fingerprint = repo_node
    inputs = {case: dcgm_vars(fingerprint, **extra) for case, (extra, _variable, _says) in BAD.items()}
    return run_cases(node, "gpufleet.cloud.dcgm", inputs, tmp_path_factory.mktemp("bad-dcgm"))


@pytest.mark.parametrize("case", list(BAD))
def test_bad_dcgm_input_is_refused_before_any_change(bad_runs, case):
    _extra, variable, says = BAD[case]
    assert_case_refused(bad_runs, case, variable, says)
