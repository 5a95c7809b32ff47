"""encrypted_storage on real nodes against a real KMS (moto for AWS, the
loopback emulators for the others), through the official SDKs.

Each test converges a privileged Debian node with a LUKS2 volume and an
fscrypt directory, both on loop files. The node starts from the session's
snapshot with the KMS SDKs installed (kms_node_image): the subject here is
encrypted_storage, not _kms_client's first install. The kernel here has no
device-mapper, so the LUKS2 volume is proven up to `cryptsetup open
--test-passphrase`; the fscrypt directory end to end. The open/mount/read/
write steps of LUKS2 are in test_luks_dm.py (marker dm)."""

from __future__ import annotations

import json

import pytest

from tests.integration.storage_nodes import apply_role, files_containing, node, sh, sha256_of

pytestmark = pytest.mark.lab

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


@pytest.mark.parametrize("host_kms", ["aws"], indirect=True)
def test_aws_kms_unlocks_after_restart_and_no_file_holds_the_key(host_kms, kms_node_image):
    kms = host_kms
    with node(kms_node_image, privileged=True) as name:
        outputs = volumes(name, kms)
        vault_key, ckpt_key = data_key(name, kms, "vault"), data_key(name, kms, "ckpt")
        assert len(vault_key) == 32 and vault_key != ckpt_key

        # LUKS2: formatted with the KMS key, which opens its keyslot.
        sh(name, "cryptsetup isLuks /var/lib/gpufleet/storage/%s-vault.img" % name)
        sh(name, "gpufleet-storage verify vault")
        # At "boot" (a restart of the unit) it decrypts through KMS, proves the
        # key, and then stops short of device-mapper, saying so.
        assert unit(name, "restart", "vault").returncode != 0
        log = journal(name, "vault")
        assert "KMS decrypted the data key" in log and "opens a LUKS2 keyslot" in log
        assert "no device-mapper" in log

        # fscrypt: end to end across a restart of the unit.
        sh(name, "echo 'weights of step 100' > /data/ckpt/encrypted/model.bin")
        assert unit(name, "stop", "ckpt").returncode == 0
        assert_locked(name)
        assert unit(name, "start", "ckpt").returncode == 0
        assert sh(name, "cat /data/ckpt/encrypted/model.bin").stdout == "weights of step 100\n"
        # Locked again while mounted: names are ciphertext, contents unreadable.
        sh(name, "fscrypt lock /data/ckpt/encrypted")
        listing = sh(name, "ls /data/ckpt/encrypted").stdout.split()
        assert listing and "model.bin" not in listing
        assert sh(name, f"cat /data/ckpt/encrypted/{listing[0]}", check=False).returncode != 0
        assert unit(name, "restart", "ckpt").returncode == 0
        assert "weights of step 100" in sh(name, "cat /data/ckpt/encrypted/model.bin").stdout

        # The plaintext keys are in no file on the node and in no output.
        assert files_containing(name, vault_key, ckpt_key) == []
        for out in outputs:
            for key in (vault_key, ckpt_key):
                assert key.hex() not in out and key.hex().upper() not in out


@pytest.mark.parametrize("host_kms", ["aliyun", "tencent", "huawei"], indirect=True)
def test_other_clouds_kms_unlock_and_rotation_rewraps_without_reformat(host_kms, kms_node_image):
    kms = host_kms
    with node(kms_node_image, privileged=True) as name:
        volumes(name, kms)
        key = data_key(name, kms, "vault")
        header = sha256_of(name, f"/var/lib/gpufleet/storage/{name}-vault.img", 16 << 20)
        sh(name, "echo checkpoint > /data/ckpt/encrypted/state")

        # Rotation: the role with the second master key re-wraps the key.
        volumes(name, kms, key=1)
        envelope = json.loads(sh(name, f"cat {ENVELOPE.format('vault')}").stdout)
        assert envelope["key_id"] == kms.keys[1]
        assert data_key(name, kms, "vault") == key
        assert sha256_of(name, f"/var/lib/gpufleet/storage/{name}-vault.img", 16 << 20) == header
        sh(name, "gpufleet-storage verify vault")
        assert unit(name, "restart", "ckpt").returncode == 0
        assert sh(name, "cat /data/ckpt/encrypted/state").stdout == "checkpoint\n"
        assert files_containing(name, key, data_key(name, kms, "ckpt")) == []


@pytest.mark.parametrize("host_kms", ["tencent"], indirect=True)
def test_faults_keep_the_volume_locked_and_lose_nothing(host_kms, kms_node_image):
    kms = host_kms
    with node(kms_node_image, privileged=True) as name:
        volumes(name, kms)
        sh(name, "echo 'weights of step 100' > /data/ckpt/encrypted/model.bin")
        envelopes = {v: sh(name, f"cat {ENVELOPE.format(v)}").stdout for v in ("vault", "ckpt")}
        assert unit(name, "stop", "ckpt").returncode == 0

        # KMS unreachable: the unit fails saying so; the volume stays locked.
        kms.stop()
        assert unit(name, "start", "ckpt").returncode != 0
        assert "is unreachable" in journal(name, "ckpt") and "stays locked" in journal(name, "ckpt")
        assert_locked(name)
        assert sh(name, "gpufleet-storage verify vault", check=False).returncode != 0
        kms.start()
        assert unit(name, "start", "ckpt").returncode == 0
        assert sh(name, "cat /data/ckpt/encrypted/model.bin").stdout == "weights of step 100\n"
        assert unit(name, "stop", "ckpt").returncode == 0

        # A wrong key (an envelope of another data key): fails clearly, stays locked.
        for volume in ("vault", "ckpt"):
            wrong = kms.wrap_other_key(envelopes[volume])
            sh(name, f"cat > {ENVELOPE.format(volume)} <<'EOF'\n{wrong}EOF")
        assert unit(name, "start", "ckpt").returncode != 0
        assert "does not unlock" in journal(name, "ckpt")
        assert_locked(name)
        verify = sh(name, "gpufleet-storage verify vault", check=False)
        assert verify.returncode != 0 and "opens no keyslot" in verify.stderr

        # Nothing lost: the right envelope brings everything back.
        for volume in ("vault", "ckpt"):
            sh(name, f"cat > {ENVELOPE.format(volume)} <<'EOF'\n{envelopes[volume]}EOF")
        assert unit(name, "start", "ckpt").returncode == 0
        assert sh(name, "cat /data/ckpt/encrypted/model.bin").stdout == "weights of step 100\n"
        sh(name, "gpufleet-storage verify vault")
