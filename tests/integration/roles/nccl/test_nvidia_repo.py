"""CUDA and NCCL from the roles' default source, cuda_repo: NVIDIA's URL,
answered by a local copy of NVIDIA's repository (tests/emulators/
nvidia_repos.py) that the node reaches at developer.download.nvidia.com on
its loopback, over HTTPS with a test CA it trusts. Two toolkits side by side
with the default one selected, and NCCL's build matched to the default
toolkit, then both moved to the other toolkit, and to the same copy as a
mirror (*_source: mirror). A toolkit or an NCCL build the repository does
not have is refused before anything changes.
"""

from __future__ import annotations

import pytest

from tests.integration.nvidia_repos_node import CUDA_MIRROR, held, installed, serve_nvidia_repos
from tests.integration.roles.bad_input import assert_case_refused, run_cases
from tests.support.nodes import node_exec, recap, run_roles

pytestmark = pytest.mark.lab

# NVIDIA's NCCL builds in the copy: one per toolkit.
NCCL = {"13.0": "2.27.7-1", "12.8": "2.26.2-1"}
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
# With 13.0 the default toolkit, both roles use NVIDIA's URL; with 12.8, the
# copy as a mirror.
SOURCES = {
    "13.0": {"cuda_source": "cuda_repo", "nccl_source": "cuda_repo"},
    "12.8": {"cuda_source": "mirror", "cuda_mirror_url": CUDA_MIRROR,
             "nccl_source": "mirror", "nccl_mirror_url": CUDA_MIRROR},
}


@pytest.fixture(scope="module")
def repo_node(fresh_node, tmp_path_factory):
    manifest = serve_nvidia_repos(fresh_node, tmp_path_factory.mktemp("serve"), as_nvidia=True)
    return fresh_node, manifest["keys"]["cuda"]["fingerprint"]


def toolkit_vars(fingerprint, default, **extra):
    # NVIDIA's URL or the mirror; the key is the copy's.
    return {
        **SOURCES[default],
        "cuda_repo_key_fingerprints": [fingerprint],
        "cuda_toolkits": [{"version": "12.8", "components": ["cudart"]},
                          {"version": "13.0", "components": ["cudart", "nvcc"]}],
        "cuda_default_version": default,
        # No driver on this node: the compatibility check reads this one.
        "cuda_driver_version": "580.95.05",
        "nccl_repo_key_fingerprints": [fingerprint],
        "nccl_version": NCCL[default],
        "nccl_tests": "never",
        **extra,
    }


def converge(repo_node, tmp_path, default, *, check=False, **extra):
    node, fingerprint = repo_node
    extra_vars = toolkit_vars(fingerprint, default, **extra)
    return run_roles(node, tmp_path, ["gpufleet.cloud.cuda", "gpufleet.cloud.nccl"], extra_vars, check=check)


def assert_default(node, default):
    packages = installed(node)
    for name in ("cuda-cudart-12-8", "cuda-cudart-13-0", "cuda-nvcc-13-0"):
        assert name in packages, name
    want_nccl = f"{NCCL[default]}+cuda{default}"
    assert packages["libnccl2"] == packages["libnccl-dev"] == want_nccl, packages.get("libnccl2")
    assert {"cuda-cudart-12-8", "cuda-cudart-13-0", "cuda-nvcc-13-0", "libnccl2", "libnccl-dev"} <= held(node)
    home = node_exec(node, "readlink", "-f", "/usr/local/cuda").stdout.strip()
    assert home == f"/usr/local/cuda-{default}"
    query = node_exec(node, "update-alternatives", "--query", "cuda").stdout
    assert f"Value: /usr/local/cuda-{default}" in query
    sources = node_exec(node, "cat", "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").stdout
    url = NVIDIA_URL if SOURCES[default]["cuda_source"] == "cuda_repo" else CUDA_MIRROR
    assert f"URIs: {url}/debian12/x86_64/" in sources


def test_two_toolkits_side_by_side_and_nccl_follows_the_default(repo_node, tmp_path):
    node = repo_node[0]
    fresh = converge(repo_node, tmp_path, "13.0", check=True)
    assert fresh.returncode == 0, fresh.stdout[-5000:]
    assert "libnccl2" not in installed(node), "check mode installed something"

    for default in ("13.0", "12.8"):
        result = converge(repo_node, tmp_path, default)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        assert recap(result.stdout)[node]["changed"] > 0
        assert_default(node, default)

    again = converge(repo_node, tmp_path, "12.8")
    assert recap(again.stdout)[node]["changed"] == 0, again.stdout[-5000:]
    checked = converge(repo_node, tmp_path, "12.8", check=True)
    assert checked.returncode == 0 and recap(checked.stdout)[node]["changed"] == 0, checked.stdout[-5000:]


# Each case: (what it changes, the variable its refusal names, what the
# refusal says). Both run in one ansible-playbook run (../bad_input.py),
# each case its own alias of the node, after the moves above.
BAD = {
    # NCCL 2.27.7 is built for CUDA 13.0 in the copy, not for 12.8.
    "NCCL build the toolkit lacks": (
        {"nccl_version": "2.27.7-1"}, "nccl_version/nccl_cuda_version",
        "libnccl2 has no version 2.27.7-1+cuda12.8 (it has 2.26.2-1+cuda12.8, 2.27.7-1+cuda13.0)"),
    "toolkit the repository lacks": (
        {"cuda_toolkits": [{"version": "12.8", "components": ["cudart"]}, {"version": "12.9", "components": ["cudart"]}]},
        "cuda_toolkits", "cuda-cudart-12-9 is not in it"),
}


@pytest.fixture(scope="module")
def bad_runs(repo_node, tmp_path_factory):
    node, fingerprint = repo_node
    inputs = {case: toolkit_vars(fingerprint, "12.8", **extra) for case, (extra, _variable, _says) in BAD.items()}
    return run_cases(node, ["gpufleet.cloud.cuda", "gpufleet.cloud.nccl"], inputs, tmp_path_factory.mktemp("bad-nccl"))


@pytest.mark.parametrize("case", list(BAD))
def test_what_the_repository_lacks_is_refused_before_any_change(bad_runs, case):
    _extra, variable, says = BAD[case]
    assert_case_refused(bad_runs, case, variable, says)
