"""Bad inputs to gpufleet.cloud.encrypted_storage fail in preflight and
change nothing."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

GOOD = {
    "encrypted_storage_kms_provider": "aws",
    "encrypted_storage_kms_key_id": "alias/gpufleet-storage",
    "encrypted_storage_loop_file": "/var/lib/gpufleet/storage/data.img",
}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"encrypted_storage_devices": "/dev/vdb", "gpufleet_strict_inputs": True},
        "encrypted_storage_devices",
        "did you mean encrypted_storage_device?",
    ),
    "LUKS device that does not exist": (
        {"encrypted_storage_loop_file": "", "encrypted_storage_device": "/dev/gpufleet-no-such-disk"}, "encrypted_storage_device"),
    "unknown KMS provider": ({"encrypted_storage_kms_provider": "gcp"}, "encrypted_storage_kms_provider"),
    "no master key": ({"encrypted_storage_kms_key_id": ""}, "encrypted_storage_kms_key_id"),
    "unknown backend": ({"encrypted_storage_backend": "zfs"}, "encrypted_storage_backend"),
    "system directory as mount point": ({"encrypted_storage_mount_point": "/usr"}, "encrypted_storage_mount_point"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.encrypted_storage",
    CASES,
    files=["/etc/gpufleet", "/opt/gpufleet", "/var/lib/gpufleet"],
    packages=["cryptsetup-bin"],
    good=GOOD,
)
