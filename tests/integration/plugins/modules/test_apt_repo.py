"""gpufleet.cloud.apt_repo on a Debian 13 node, where apt brings sqv in
place of gpgv: the module's signature and index checks through the real
sqv, against the local copy of NVIDIA's CUDA repository
(tests/emulators/nvidia_repos.py) on the node's loopback. The unit tests
run the same checks through gpgv, on the host."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.integration.conftest import node_container
from tests.integration.nvidia_repos_node import break_copies, serve_nvidia_repos
from tests.support.nodes import PODMAN_CONNECTION, PODMAN_ENV, ROOT, ansible_env, node_exec

pytestmark = pytest.mark.lab

URL = "http://127.0.0.1:8089"
REPO = "debian13/x86_64"


@pytest.fixture(scope="module")
def sqv_node(tmp_path_factory):
    with node_container(release="13") as name:
        manifest = serve_nvidia_repos(name, tmp_path_factory.mktemp("serve"))
        # apt 3.0 depends on sqv alone: without gpgv the module must use it.
        assert node_exec(name, "sh", "-c", "command -v gpgv").returncode != 0, "gpgv is on the node"
        assert node_exec(name, "sh", "-c", "command -v sqv").returncode == 0
        break_copies(name, manifest, "debian13", "resigned", "tampered", "unsigned")
        yield name, {key: value["fingerprint"] for key, value in manifest["keys"].items()}


def apt_repo(node: str, copy: str, fingerprint: str) -> dict:
    """The module's result for `copy`, asked for nvidia-open-580."""
    args = {
        "url": f"{URL}/{copy}/{REPO}/",
        "key_url": f"{URL}/{copy}/{REPO}/3bf863cc.pub",
        "key_fingerprints": [fingerprint],
        "packages": [{"name": "nvidia-open-580", "version": "580.95.05*"}],
        "url_var": "nvidia_driver_mirror_url",
        "fingerprint_var": "nvidia_driver_repo_key_fingerprints",
    }
    exe = shutil.which("ansible")
    assert exe, "ansible is not on PATH"
    result = subprocess.run([exe, "all", "-i", f"{node},", "-c", PODMAN_CONNECTION, "-o", "-m", "gpufleet.cloud.apt_repo",
                             "-a", json.dumps(args)], cwd=ROOT, env=ansible_env() | PODMAN_ENV, capture_output=True, text=True,
                            check=False)
    line = next((line for line in result.stdout.splitlines() if " => " in line), None)
    assert line, result.stdout + result.stderr
    status, out = line.split(" => ", 1)
    # The one-line form says FAILED in its prefix, not in the result.
    return {**json.loads(out), "failed": "FAILED" in status}


def test_a_repository_signed_by_the_pinned_key_passes(sqv_node):
    node, keys = sqv_node
    out = apt_repo(node, "cuda", keys["cuda"])
    assert not out.get("failed"), out
    assert out["signed_by"] == keys["cuda"]
    assert "580.95.05-1" in out["versions"]["nvidia-open-580"]


@pytest.mark.parametrize("copy, key, says", [
    ("resigned", "libnvidia-container", "which is not the pinned key"),
    ("tampered", "cuda", "Packages.gz that its signed Release does not list"),
    ("unsigned", "cuda", "is not signed: it has a Release but neither InRelease nor Release.gpg"),
])
def test_what_apt_would_refuse_is_refused_by_name(sqv_node, copy, key, says):
    node, keys = sqv_node
    out = apt_repo(node, copy, keys[key])
    assert out.get("failed"), out
    assert out["msg"].startswith("nvidia_driver_mirror_url:") and says in out["msg"], out["msg"]
