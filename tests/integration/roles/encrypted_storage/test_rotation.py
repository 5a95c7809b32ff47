"""encrypted_storage's key rotation against the Alibaba, Tencent and
Huawei KMS emulators, on real nodes: the role with a second master key
re-wraps the data key without reformatting the volume. Its own file (not
test_encrypted_storage.py) so the lab stage's workers, which take a file
each (--dist loadfile), can run it beside the AWS and fault tests; see
test_encrypted_storage.py for what the nodes can and cannot do here."""

from __future__ import annotations

import json

import pytest

from tests.integration.roles.encrypted_storage.volumes import ENVELOPE, data_key, unit, volumes
from tests.integration.storage_nodes import files_containing, node, sh, sha256_of

pytestmark = pytest.mark.lab


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
