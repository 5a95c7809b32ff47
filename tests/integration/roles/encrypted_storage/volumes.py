"""What the encrypted_storage tests on real nodes share: both volumes
converged through the role, and reads of the node's keys, units and
journal."""

from __future__ import annotations

import json

from tests.integration.storage_nodes import apply_role, sh

ROLE = "gpufleet.cloud.encrypted_storage"
ENVELOPE = "/etc/gpufleet/kms/storage-{}.envelope"


def volume_vars(name, kms, backend, volume, key=0):
    """The role's variables for one volume on a loop file of node ``name``."""
    return dict(kms.role_vars(key), encrypted_storage_backend=backend, encrypted_storage_name=volume,
                encrypted_storage_loop_file=f"/var/lib/gpufleet/storage/{name}-{volume}.img",
                encrypted_storage_loop_size="64M", encrypted_storage_mount_point=f"/data/{volume}")


def converge(name, kms, backend, volume, key=0, *extra):
    """Converge one volume; returns the run's Ansible output."""
    rc, out, stats = apply_role(name, ROLE, volume_vars(name, kms, backend, volume, key), *extra)
    assert rc == 0 and stats.get("failed") == 0, out[-4000:]
    return out


def volumes(name, kms, verbose=False):
    """Converge both volumes; returns the Ansible output of both runs,
    ``verbose`` (-vvv) for a test that looks for the keys in all of it."""
    extra = ("-vvv",) if verbose else ()
    return [converge(name, kms, backend, volume, 0, *extra) for backend, volume in (("luks", "vault"), ("fscrypt", "ckpt"))]


def drift_states(name, kms, tmp_path, *extra, key=0):
    """The fscrypt volume's role run with gpufleet's drift callback (a scan
    with ``--check --diff``, a converge without): {resource: state}."""
    report = tmp_path / ("drift-%d.json" % len(list(tmp_path.glob("drift-*.json"))))
    rc, out, _stats = apply_role(name, ROLE, volume_vars(name, kms, "fscrypt", "ckpt", key), *extra,
                                 env={"ANSIBLE_CALLBACKS_ENABLED": "gpufleet.cloud.drift",
                                      "GPUFLEET_DRIFT_REPORT": str(report)})
    assert report.exists(), out[-4000:]
    return {r["resource"]: r["state"] for r in json.loads(report.read_text())["records"]}


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
