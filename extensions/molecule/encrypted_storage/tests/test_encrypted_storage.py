"""What a node converged by gpufleet.cloud.encrypted_storage really has:
a LUKS2 volume (vault) and an fscrypt directory (ckpt) on loop files, keyed
by data keys from the Tencent KMS emulator running on the node."""

from __future__ import annotations

import json

import pytest
from conftest import assert_dropin_moved_aside, assert_file, assert_package

ENVELOPE = "/etc/gpufleet/kms/storage-{}.envelope"

# Decrypt an envelope through gpufleet-kms and search every file for the
# key, in one process: the key goes from the pipe into this script's memory
# and nowhere else.
SEARCH = r"""
import base64, os, subprocess, sys
keys = [subprocess.run(["gpufleet-kms", "decrypt", e, "--credentials", c], capture_output=True, check=True).stdout
        for e, c in zip(sys.argv[1::2], sys.argv[2::2])]
forms = [f for k in keys for f in (k, k.hex().encode(), base64.b64encode(k))]
hits = []
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            data = open(path, "rb").read()
        except OSError:
            continue
        if any(f in data for f in forms):
            hits.append(path)
print(len(keys[0]), len(keys[1]), hits)
"""


@pytest.mark.parametrize("name", ["cryptsetup-bin", "fscrypt", "e2fsprogs", "python3-venv"])
def test_packages(host, name):
    assert_package(host, name)


def test_sdk_in_the_virtual_environment(host):
    assert host.run("/opt/gpufleet/kms/bin/python3 -c 'import tencentcloud.kms.v20190118'").rc == 0


@pytest.mark.parametrize("volume", ["vault", "ckpt"])
def test_only_the_envelope_is_stored(host, volume):
    text = assert_file(host, ENVELOPE.format(volume), mode=0o600, contains=('"provider": "tencent"',))
    envelope = json.loads(text)
    assert envelope["key_id"] == "gpufleet-storage-1" and envelope["key_bytes"] == 32
    assert set(envelope) == {"format", "provider", "key_id", "key_bytes", "ciphertext", "region", "endpoint"}
    settings = json.loads(assert_file(host, f"/etc/gpufleet/storage/{volume}.json", mode=0o600))
    assert settings["envelope"] == ENVELOPE.format(volume)
    assert_file(host, f"/etc/gpufleet/storage/{volume}.credentials.json", mode=0o600)


def test_no_file_holds_a_plaintext_key(host):
    args = " ".join(f"{ENVELOPE.format(v)} /etc/gpufleet/storage/{v}.credentials.json" for v in ("vault", "ckpt"))
    out = host.run(f"/opt/gpufleet/kms/bin/python3 -c '{SEARCH}' {args}")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == "32 32 []"


def test_luks_volume_is_formatted_with_the_kms_key(host):
    loop = f"/var/lib/gpufleet/storage/{host.backend.hostname}-vault.img"
    assert host.run(f"cryptsetup isLuks {loop}").rc == 0
    dump = host.run(f"cryptsetup luksDump {loop}").stdout
    assert "Version:       \t2" in dump and "pbkdf2" in dump
    verify = host.run("gpufleet-storage verify vault")
    assert verify.rc == 0, verify.stderr
    assert "opens a LUKS2 keyslot" in verify.stderr


def test_luks_unit_is_enabled_and_fails_clearly_without_device_mapper(host):
    assert host.service("gpufleet-storage@vault.service").is_enabled
    status = json.loads(host.run("gpufleet-storage status vault").stdout)
    assert status == {"name": "vault", "backend": "luks", "locked": True, "mounted": False, "device_mapper": False}
    start = host.run("systemctl start gpufleet-storage@vault.service")
    assert start.rc != 0
    log = host.run("journalctl -u gpufleet-storage@vault.service --no-pager -o cat").stdout
    assert "KMS decrypted the data key" in log and "opens a LUKS2 keyslot" in log and "no device-mapper" in log
    host.run("systemctl reset-failed gpufleet-storage@vault.service")


def test_a_drop_in_that_kept_the_vault_unlocked_on_stop_is_moved_aside(host):
    assert_dropin_moved_aside(host, "gpufleet-storage@vault.service", "local.conf", "ExecStop=/bin/true")


def test_fscrypt_directory_locks_and_unlocks_with_the_kms_key(host):
    assert host.service("gpufleet-storage@ckpt.service").is_enabled
    assert host.service("gpufleet-storage@ckpt.service").is_running
    assert host.run("echo 'weights of step 100' > /data/ckpt/encrypted/model.bin").rc == 0
    assert host.run("systemctl stop gpufleet-storage@ckpt.service").rc == 0
    assert json.loads(host.run("gpufleet-storage status ckpt").stdout)["locked"] is True
    assert host.run("cat /data/ckpt/encrypted/model.bin").rc != 0
    assert host.run("systemctl start gpufleet-storage@ckpt.service").rc == 0
    assert host.file("/data/ckpt/encrypted/model.bin").content_string == "weights of step 100\n"
    # Locked while mounted: the names are ciphertext and the data unreadable.
    assert host.run("fscrypt lock /data/ckpt/encrypted").rc == 0
    names = host.run("ls /data/ckpt/encrypted").stdout.split()
    assert names and "model.bin" not in names
    assert host.run(f"cat /data/ckpt/encrypted/{names[0]}").rc != 0
    assert host.run("systemctl restart gpufleet-storage@ckpt.service").rc == 0
    assert host.file("/data/ckpt/encrypted/model.bin").content_string == "weights of step 100\n"
