"""The LUKS2 steps that need device-mapper: open, mount, write, read,
close. They skip only where /dev/mapper/control is absent (as on our
test machines, whose kernel has no device-mapper)."""

from __future__ import annotations

import os

import pytest

from tests.integration.storage_nodes import apply_role, node, sh

pytestmark = [
    pytest.mark.lab,
    pytest.mark.dm,
    pytest.mark.skipif(not os.path.exists("/dev/mapper/control"), reason="no /dev/mapper/control: no device-mapper"),
]


@pytest.mark.parametrize("host_kms", ["aws"], indirect=True)
def test_luks_volume_opens_mounts_and_keeps_data_across_a_restart(host_kms):
    with node(privileged=True) as name:
        variables = dict(host_kms.role_vars(), encrypted_storage_backend="luks", encrypted_storage_name="vault",
                         encrypted_storage_loop_file=f"/var/lib/gpufleet/storage/{name}-vault.img",
                         encrypted_storage_loop_size="128M", encrypted_storage_mount_point="/data/vault")
        rc, out, stats = apply_role(name, "gpufleet.cloud.encrypted_storage", variables)
        assert rc == 0 and stats["failed"] == 0, out[-4000:]
        sh(name, "systemctl is-active gpufleet-storage@vault.service")
        sh(name, "findmnt --source /dev/mapper/vault --target /data/vault")
        sh(name, "head -c 1000000 /dev/urandom > /data/vault/blob && sha256sum /data/vault/blob > /root/blob.sha256")
        sh(name, "systemctl stop gpufleet-storage@vault.service")
        assert sh(name, "test -e /dev/mapper/vault", check=False).returncode != 0
        assert sh(name, "findmnt /data/vault", check=False).returncode != 0
        sh(name, "systemctl start gpufleet-storage@vault.service")
        sh(name, "sha256sum -c /root/blob.sha256")
        sh(name, "systemctl stop gpufleet-storage@vault.service")
