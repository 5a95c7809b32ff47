"""The driver from NVIDIA's repository layout, the path every real user
takes: a local copy of NVIDIA's CUDA repository (tests/emulators/
nvidia_repos.py, signed with a key made for the test) served on the node's
loopback, used as nvidia_driver_source=mirror for 570 and 580, and for 590
at NVIDIA's own URL with the default source, cuda_repo.

One node moves 570 -> 580 -> 590: each move releases exactly the holds the
new branch replaces (a hold the role did not set stays), the 580 -> 590
move crosses NVIDIA's rename (nvidia-open-580 becomes nvidia-open,
nvidia-fabricmanager-580 nvidia-fabricmanager, and the pinning package
arrives) and moves from the mirror to NVIDIA's URL, and the fabric manager is always the driver's version. Then
idempotence and check mode, and the bad inputs: a key whose fingerprint is
not pinned, a repository not signed by the pinned key, an unreachable repository, a branch and a version the
repository does not have, each refused before anything changes (all in one
run, each case its own alias of the node: ../bad_input.py).
"""

from __future__ import annotations

import pytest

from tests.integration.nvidia_repos_node import CUDA_MIRROR, break_copies, held, installed, serve_nvidia_repos
from tests.integration.roles.bad_input import assert_case_refused, run_cases
from tests.support.nodes import node_exec, recap, run_roles
from tests.support.ports import REFUSED_URL

pytestmark = pytest.mark.lab

PIN_FILE = "/etc/apt/preferences.d/gpufleet-nvidia_driver"
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
# 570 and 580 from the copy as a mirror; 590 from it at NVIDIA's URL, the
# default source.
SOURCES = {False: {"nvidia_driver_source": "mirror", "nvidia_driver_mirror_url": CUDA_MIRROR},
           True: {"nvidia_driver_source": "cuda_repo"}}
BRANCHES = {"570": "570.195.03", "580": "580.95.05", "590": "590.44.01"}
# What the role holds for each branch (open modules, NVSwitch board).
HELD = {
    "570": {"nvidia-open-570", "nvidia-fabricmanager-570"},
    "580": {"nvidia-open-580", "nvidia-fabricmanager-580"},
    "590": {"nvidia-open", "nvidia-driver-pinning-590", "nvidia-fabricmanager"},
}


@pytest.fixture(scope="module")
def repo_node(fresh_node, tmp_path_factory):
    manifest = serve_nvidia_repos(fresh_node, tmp_path_factory.mktemp("serve"), as_nvidia=True)
    # A hold the role did not set, which no move may release.
    assert node_exec(fresh_node, "apt-mark", "hold", "tzdata").returncode == 0
    # A mirror whose key URL serves another key, pinned, while its Release
    # is still signed by the copy's own key. The key check passes; the
    # signature must not.
    break_copies(fresh_node, manifest, "debian12", "resigned")
    return fresh_node, manifest["keys"]["cuda"]["fingerprint"], manifest["keys"]["libnvidia-container"]["fingerprint"]


def driver_vars(fingerprint, branch, **extra):
    return {
        **SOURCES[branch == "590"],
        "nvidia_driver_repo_key_fingerprints": [fingerprint],
        "nvidia_driver_branch": branch,
        "nvidia_driver_version": BRANCHES.get(branch, ""),
        "nvidia_driver_kernel_modules": "open",
        "nvidia_driver_fabricmanager": "always",
        **extra,
    }


def converge(repo_node, tmp_path, branch, *, check=False, diff=False, **extra):
    node, fingerprint = repo_node[:2]
    extra_vars = driver_vars(fingerprint, branch, **extra)
    return run_roles(node, tmp_path, ["gpufleet.cloud.nvidia_driver"], extra_vars, check=check, diff=diff)


def assert_branch(node, branch):
    version = BRANCHES[branch]
    assert held(node) == HELD[branch] | {"tzdata"}
    packages = installed(node)
    for name in HELD[branch] | {"nvidia-kernel-open-dkms", "libcuda1", "libnvidia-ml1"}:
        assert packages.get(name, "").startswith(version + "-"), (name, packages.get(name))
    # Only one branch's metapackages and fabric manager are left.
    others = {name for b, names in HELD.items() if b != branch for name in names} - HELD[branch]
    assert not others & set(packages), others & set(packages)
    assert f"Pin: version {version}*" in node_exec(node, "cat", PIN_FILE).stdout
    assert node_exec(node, "systemctl", "is-enabled", "nvidia-fabricmanager").stdout.strip() == "enabled"
    sources = node_exec(node, "cat", "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").stdout
    assert f"URIs: {NVIDIA_URL if branch == '590' else CUDA_MIRROR}/debian12/x86_64/" in sources
    assert "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-cuda.asc" in sources


def test_branches_move_across_the_rename(repo_node, tmp_path):
    node = repo_node[0]
    fresh = converge(repo_node, tmp_path, "570", check=True, diff=True)
    assert fresh.returncode == 0, fresh.stdout[-5000:]
    assert not installed(node).keys() & HELD["570"], "check mode installed something"
    # The repository a fresh node lacks is reported, with what would be
    # written, and not written.
    assert f"+URIs: {CUDA_MIRROR}/debian12/x86_64/" in fresh.stdout, fresh.stdout[-5000:]
    for path in ("/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources", "/etc/apt/keyrings/gpufleet-nvidia-cuda.asc"):
        assert node_exec(node, "test", "-e", path).returncode != 0, path

    for previous, branch in ((None, "570"), ("570", "580"), ("580", "590")):
        if previous:
            # Check mode before a move: it tells the move, and makes none
            # (apt's simulation must get past the holds the move releases).
            preview = converge(repo_node, tmp_path, branch, check=True)
            assert preview.returncode == 0, preview.stdout[-6000:] + preview.stderr[-2000:]
            assert recap(preview.stdout)[node]["changed"] > 0
            assert_branch(node, previous)
        result = converge(repo_node, tmp_path, branch)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        assert recap(result.stdout)[node]["changed"] > 0
        assert_branch(node, branch)

    # 590 after the rename: the pinning package NVIDIA ships is the branch's.
    assert node_exec(node, "test", "-e", "/etc/apt/preferences.d/nvidia-driver-pinning-590").returncode == 0
    again = converge(repo_node, tmp_path, "590")
    assert recap(again.stdout)[node]["changed"] == 0, again.stdout[-5000:]
    checked = converge(repo_node, tmp_path, "590", check=True)
    assert checked.returncode == 0 and recap(checked.stdout)[node]["changed"] == 0, checked.stdout[-5000:]


# Each case: (what it changes, the variable its refusal names, what the
# refusal says). All run in one ansible-playbook run (../bad_input.py), each
# case its own alias of the node, after the moves above.
BAD = {
    # A key whose fingerprint is not pinned: NVIDIA's default pin against this mirror's own key.
    "key not pinned": ({"nvidia_driver_repo_key_fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]},
                       "nvidia_driver_repo_key_fingerprints", "is not pinned"),
    "not a fingerprint": ({"nvidia_driver_repo_key_fingerprints": ["3BF863CC"]}, "nvidia_driver_repo_key_fingerprints",
                          "is not a key fingerprint"),
    "unreachable mirror": ({"nvidia_driver_mirror_url": f"{REFUSED_URL}/cuda"}, "nvidia_driver_mirror_url",
                           "cannot be fetched"),
    # The other key pinned and served (TOOLKIT_KEY: the toolkit copy's key), the Release signed by the CUDA copy's.
    "signed by another key": ({"nvidia_driver_mirror_url": "http://127.0.0.1:8089/resigned",
                               "nvidia_driver_repo_key_fingerprints": "TOOLKIT_KEY"},
                              "nvidia_driver_mirror_url",
                              "is not signed by the key pinned in nvidia_driver_repo_key_fingerprints"),
    "version the branch lacks": ({"nvidia_driver_version": "580.99.99"}, "nvidia_driver_branch/nvidia_driver_version",
                                 "nvidia-open-580 has no version 580.99.99*"),
    "branch the repository lacks": ({"nvidia_driver_branch": "575", "nvidia_driver_version": "575.64.05"},
                                    "nvidia_driver_branch/nvidia_driver_version", "nvidia-open-575 is not in it"),
}


@pytest.fixture(scope="module")
def bad_runs(repo_node, tmp_path_factory):
    """Every BAD case in one run; the pin file before and after."""
    node, fingerprint, toolkit_key = repo_node
    inputs = {}
    for case, (extra, _variable, _says) in BAD.items():
        extra = dict(extra)
        if extra.get("nvidia_driver_repo_key_fingerprints") == "TOOLKIT_KEY":
            extra["nvidia_driver_repo_key_fingerprints"] = [toolkit_key]
        inputs[case] = driver_vars(fingerprint, extra.pop("nvidia_driver_branch", "580"), **extra)
    before = node_exec(node, "cat", PIN_FILE).stdout
    outcome = run_cases(node, "gpufleet.cloud.nvidia_driver", inputs, tmp_path_factory.mktemp("bad-repo"))
    return before, outcome, node_exec(node, "cat", PIN_FILE).stdout


@pytest.mark.parametrize("case", list(BAD))
def test_bad_repository_input_is_refused_before_any_change(bad_runs, case):
    before, outcome, after = bad_runs
    _extra, variable, says = BAD[case]
    assert_case_refused(outcome, case, variable, says)
    assert after == before
