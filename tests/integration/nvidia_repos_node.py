"""A local copy of NVIDIA's repositories (tests/emulators/nvidia_repos.py)
served on a test node's loopback, through the same tasks the Molecule
scenarios' prepare uses (extensions/molecule/shared/nvidia_repos.yml)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.nodes import PODMAN_CONNECTION, ROOT, node_exec, run_playbook

# What the roles' *_mirror_url is set to: the directory above <platform>/<arch>/.
CUDA_MIRROR = "http://127.0.0.1:8089/cuda"
SERVE = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Serve the local copy of NVIDIA's repositories
      ansible.builtin.import_tasks: {tasks}
"""


def serve_nvidia_repos(node: str, workdir: Path, *, as_nvidia: bool = False) -> dict:
    """Build and serve the repositories on `node`; returns their manifest
    (keys' fingerprints, packages). `as_nvidia` also serves the CUDA copy at
    NVIDIA's own URL (https://developer.download.nvidia.com/compute/cuda/
    repos/), for the roles' default source."""
    play = workdir / "serve-nvidia-repos.yml"
    play.write_text(SERVE.format(tasks=ROOT / "extensions/molecule/shared/nvidia_repos.yml"))
    generator = ROOT / "tests/emulators/nvidia_repos.py"
    extra = {"nvidia_repos_generator": str(generator), "nvidia_repos_as_nvidia": as_nvidia}
    result = run_playbook("-i", f"{node},", "-c", PODMAN_CONNECTION, "-e", json.dumps(extra), str(play))
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    return json.loads(node_exec(node, "cat", "/srv/mirror/nvidia/manifest.json").stdout)


# Ways to break a copy of the served CUDA repository after it was signed,
# each a shell step run in the copy's <platform>/x86_64 directory.
BREAKS = {
    # Its key URL serves the toolkit copy's key (which a test pins), while
    # its Release stays signed by the CUDA copy's key: a mirror re-signed
    # half-way.
    "resigned": "cp {served}/{toolkit_key} 3bf863cc.pub",
    # The index gains a stanza the signed Release does not list: a sync
    # caught half-way.
    "tampered": "printf 'Package: nvidia-open-999\\nVersion: 999.0-1\\n\\n' | gzip -9 >> Packages.gz",
    # No signature at all.
    "unsigned": "rm InRelease Release.gpg",
}


def break_copies(node: str, manifest: dict, platform: str, *copies: str) -> None:
    """Copies of the served CUDA copy at http://127.0.0.1:8089/<copy>, one
    per name in `copies`, each broken as BREAKS says."""
    served = "/srv/mirror/nvidia"
    toolkit_key = manifest["keys"]["libnvidia-container"]["file"]
    steps = [f"cp -a {served}/cuda {served}/{copy} && cd {served}/{copy}/{platform}/x86_64 && "
             + BREAKS[copy].format(served=served, toolkit_key=toolkit_key) for copy in copies]
    result = node_exec(node, "sh", "-ec", "\n".join(f"( {step} )" for step in steps))
    assert result.returncode == 0, result.stdout + result.stderr


def installed(node: str) -> dict[str, str]:
    """Installed packages and their versions."""
    out = node_exec(node, "dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n").stdout
    # The status's second letter is the state: "ii" installed, "hi" installed and held.
    return {row[0]: row[1] for row in map(str.split, out.splitlines()) if len(row) > 2 and row[2][1:2] == "i"}


def held(node: str) -> set[str]:
    return set(node_exec(node, "apt-mark", "showhold").stdout.split())
