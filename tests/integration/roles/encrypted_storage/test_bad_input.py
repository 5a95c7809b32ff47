"""Bad inputs to gpufleet.cloud.encrypted_storage fail in preflight and
change nothing."""

from __future__ import annotations

import pytest

from tests.integration.helpers import node_exec
from tests.integration.storage_nodes import apply_role

pytestmark = pytest.mark.lab

GOOD = {
    "encrypted_storage_kms_provider": "aws",
    "encrypted_storage_kms_key_id": "alias/gpufleet-storage",
    "encrypted_storage_loop_file": "/var/lib/gpufleet/storage/data.img",
}

CASES = {
    "LUKS device that does not exist": (
        {"encrypted_storage_loop_file": "", "encrypted_storage_device": "/dev/gpufleet-no-such-disk"}, "encrypted_storage_device"),
    "unknown KMS provider": ({"encrypted_storage_kms_provider": "gcp"}, "encrypted_storage_kms_provider"),
    "no master key": ({"encrypted_storage_kms_key_id": ""}, "encrypted_storage_kms_key_id"),
    "unknown backend": ({"encrypted_storage_backend": "zfs"}, "encrypted_storage_backend"),
    "system directory as mount point": ({"encrypted_storage_mount_point": "/usr"}, "encrypted_storage_mount_point"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node):
    extra, variable = CASES[case]
    rc, out, stats = apply_role(fresh_node, "gpufleet.cloud.encrypted_storage", dict(GOOD, **extra))
    assert rc == 2, out
    assert variable in out, f"the error does not name {variable}:\n{out}"
    assert stats["failed"] == 1 and stats["changed"] == 0, out
    for path in ("/etc/gpufleet", "/opt/gpufleet", "/var/lib/gpufleet"):
        assert node_exec(fresh_node, "test", "-e", path).returncode == 1, path
    assert "installed" not in node_exec(fresh_node, "dpkg-query", "-W", "-f", "${Status}", "cryptsetup-bin").stdout.split()
