"""A held driver moves to a new pinned version: the pain point of "held
packages block the upgrade", on a real Debian 12 node.

Debian 12 carries the driver twice: 535.261.03 (the point release) and
535.309.01 (bookworm-security). The node is converged at the older one,
apt itself refuses to move the held packages, and the role, given the newer
version, releases the holds, upgrades, holds again, and then is idempotent.
"""

from __future__ import annotations

import pytest

from tests.support.nodes import node_exec, recap, run_roles

pytestmark = pytest.mark.lab

OLD, NEW = "535.261.03", "535.309.01"
HELD = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-cfg1", "libnvidia-ptxjitcompiler1"]


def converge(node, tmp_path, version):
    extra = {"nvidia_driver_source": "distro", "nvidia_driver_version": version}
    result = run_roles(node, tmp_path, ["gpufleet.cloud.nvidia_driver"], extra)
    assert result.returncode == 0, result.stdout + result.stderr
    return recap(result.stdout)[node]


def versions(node):
    out = node_exec(node, "dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\n", *HELD).stdout
    return {line.split()[0]: (line.split()[1], line.split()[2]) for line in out.splitlines()}


def test_held_driver_moves_to_the_new_pin(fresh_node, tmp_path):
    converge(fresh_node, tmp_path, OLD)
    for name, (version, want) in versions(fresh_node).items():
        assert version.startswith(OLD + "-") and want == "hold", (name, version, want)

    # The pain point: once the pin names the new version, the holds stop
    # apt from moving the driver (what a role that only re-pins runs into).
    pin_file = "/etc/apt/preferences.d/gpufleet-nvidia_driver"
    node_exec(fresh_node, "sed", "-i", f"s/{OLD}/{NEW}/", pin_file)
    blocked = node_exec(fresh_node, "apt-get", "install", "-y", "--no-install-recommends", *HELD)
    assert blocked.returncode != 0
    assert "Held packages were changed" in blocked.stdout + blocked.stderr
    node_exec(fresh_node, "sed", "-i", f"s/{NEW}/{OLD}/", pin_file)

    stats = converge(fresh_node, tmp_path, NEW)
    assert stats["changed"] > 0
    for name, (version, want) in versions(fresh_node).items():
        assert version.startswith(NEW + "-") and want == "hold", (name, version, want)
    pin = node_exec(fresh_node, "cat", "/etc/apt/preferences.d/gpufleet-nvidia_driver").stdout
    assert f"Pin: version {NEW}*" in pin
    assert node_exec(fresh_node, "dkms", "status").stdout.strip() == f"nvidia-current/{NEW}: added"

    # Converged at the new pin: nothing left to do.
    assert converge(fresh_node, tmp_path, NEW)["changed"] == 0
