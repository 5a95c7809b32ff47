"""What the encrypted_storage tests on real nodes share: both volumes
converged through the role, and reads of the node's keys, units and
journal."""

from __future__ import annotations

import json

from tests.integration.storage_nodes import apply_role, sh

ROLE = "gpufleet.cloud.encrypted_storage"
ENVELOPE = "/etc/gpufleet/kms/storage-{}.envelope"


def volumes(name, kms, key=0):
    """Converge both volumes; returns the Ansible output of both runs."""
    outputs = []
    for backend, volume in (("luks", "vault"), ("fscrypt", "ckpt")):
        variables = dict(kms.role_vars(key), encrypted_storage_backend=backend, encrypted_storage_name=volume,
                         encrypted_storage_loop_file=f"/var/lib/gpufleet/storage/{name}-{volume}.img",
                         encrypted_storage_loop_size="64M", encrypted_storage_mount_point=f"/data/{volume}")
        rc, out, stats = apply_role(name, ROLE, variables, "-vvv")
        assert rc == 0 and stats.get("failed") == 0, out[-4000:]
        outputs.append(out)
    return outputs


def data_key(name, kms, volume):
    return kms.decrypt(sh(name, f"cat {ENVELOPE.format(volume)}").stdout)


def unit(name, action, volume):
    return sh(name, f"systemctl {action} gpufleet-storage@{volume}.service", check=False)


def journal(name, volume):
    return sh(name, f"journalctl -u gpufleet-storage@{volume}.service --no-pager -o cat").stdout


def assert_locked(name):
    # Locked: the directory is unmounted, or its names are ciphertext and
    # contents unreadable.
    state = sh(name, "gpufleet-storage status ckpt").stdout
    assert json.loads(state)["locked"] is True, state
    assert sh(name, "cat /data/ckpt/encrypted/model.bin", check=False).returncode != 0
