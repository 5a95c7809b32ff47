"""The LUKS2 steps that need device-mapper: open, mount, write, read,
close. They skip only where the kernel has no device-mapper (as on our
test machines), asked the way the role asks: `device-mapper` in
/proc/misc. /dev/mapper/control alone says nothing: `dmsetup` creates that
node on a kernel without device-mapper too, and opening it then fails."""

from __future__ import annotations

import pytest

from tests.integration.storage_nodes import apply_role, node, sh


def _kernel_has_device_mapper() -> bool:
    """What the role's preflight reads (__encrypted_storage_dm)."""
    try:
        with open("/proc/misc", encoding="ascii", errors="replace") as handle:
            return any(line.split()[1:] == ["device-mapper"] for line in handle)
    except OSError:
        return False


pytestmark = [
    pytest.mark.lab,
    pytest.mark.dm,
    pytest.mark.skipif(not _kernel_has_device_mapper(), reason="no device-mapper in /proc/misc: this kernel has none"),
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
