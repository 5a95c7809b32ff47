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

import pytest

from tests.integration.roles.encrypted_storage.volumes import (
    ENVELOPE,
    ROLE,
    assert_locked,
    data_key,
    drift_states,
    journal,
    unit,
    volumes,
)
from tests.integration.storage_nodes import files_containing, node, sh

pytestmark = pytest.mark.lab

UNLOCK = ROLE + " : Unlock and mount the volume now"
# A scan of a converged volume: the command that formats a blank device
# cannot run in check mode, so it is never verified there.
PREPARE = ROLE + " : Prepare the volume with the data key"


# The live rows' role runs are limited to the step that reads and restores
# the volume (the install step's tools and SDK venv are the image's and
# unchanged): each run costs about 40 % less (15 s against 26 s alone, a
# scan of this role on this node); every step tag working alone is the
# Molecule scenarios' side effect.
CONFIGURE = ("--tags", "encrypted_storage_configure")


def assert_a_scan_finds_only_the_volume(name, kms, tmp_path):
    states = drift_states(name, kms, tmp_path, "--check", "--diff", *CONFIGURE)
    out_of_sync = {r: s for r, s in states.items() if s != "in-sync"}
    assert out_of_sync == {UNLOCK: "drifted", PREPARE: "could-not-verify"}, states


@pytest.mark.parametrize("host_kms", ["aws"], indirect=True)
def test_aws_kms_unlocks_after_restart_and_no_file_holds_the_key(host_kms, kms_node_image, tmp_path):
    kms = host_kms
    with node(kms_node_image, privileged=True) as name:
        outputs = volumes(name, kms, verbose=True)
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
        # Live-state drift (docs/drift.md, mounts and unlocked volumes): the
        # unit stays active after the lock by hand, and after an unmount by
        # hand; each time a scan reports the volume and nothing else, and a
        # converge unlocks and mounts it again. The converge says what it
        # did: after the unmount, preparing the volume mounts its file
        # system again (locked), and the unlock restarts the unit.
        for mutation, converged in ((None, {UNLOCK}), ("umount /data/ckpt", {PREPARE, UNLOCK})):
            if mutation:
                sh(name, mutation)
            assert unit(name, "is-active", "ckpt").stdout.strip() == "active"
            assert_a_scan_finds_only_the_volume(name, kms, tmp_path)
            fixed = drift_states(name, kms, tmp_path, *CONFIGURE)
            assert {r: s for r, s in fixed.items() if s != "in-sync"} == dict.fromkeys(converged, "drifted"), fixed
            sh(name, "findmnt /data/ckpt")
            assert "weights of step 100" in sh(name, "cat /data/ckpt/encrypted/model.bin").stdout

        # The plaintext keys are in no file on the node and in no output.
        assert files_containing(name, vault_key, ckpt_key) == []
        for out in outputs:
            for key in (vault_key, ckpt_key):
                assert key.hex() not in out and key.hex().upper() not in out


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
