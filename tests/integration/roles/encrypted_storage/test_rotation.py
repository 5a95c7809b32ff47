"""encrypted_storage's key rotation against the Alibaba, Tencent and
Huawei KMS emulators, on real nodes: the role with a second master key
re-wraps the data key without reformatting the volume. Its own file (not
test_encrypted_storage.py) so the lab stage's workers, which take a file
each (--dist loadfile), can run it beside the AWS and fault tests; see
test_encrypted_storage.py for what the nodes can and cannot do here.

One node holds a volume per cloud, each keyed by its own cloud's KMS: the
cloud is the KMS client's concern (its SDK, signing and envelope), the
backend the volume's, and a volume's envelope is the same whatever its
backend. So the two LUKS2 volumes prove the re-wrap keeps the header (no
reformat) and the fscrypt one that the unit unlocks the data after it,
with six role runs on one node where a node per cloud with both backends
took twelve on three (the lab stage's longest file, docs/testing.md)."""

from __future__ import annotations

import contextlib
import json

import pytest

from tests.integration.roles.encrypted_storage.conftest import HostKms
from tests.integration.roles.encrypted_storage.volumes import ENVELOPE, converge, data_key, unit
from tests.integration.storage_nodes import files_containing, node, sh, sha256_of

pytestmark = pytest.mark.lab

# (cloud, backend, volume): each cloud's KMS keys one volume on the node.
CLOUD_VOLUMES = (("aliyun", "luks", "vault"), ("tencent", "fscrypt", "ckpt"), ("huawei", "luks", "archive"))


def header(name, volume):
    return sha256_of(name, f"/var/lib/gpufleet/storage/{name}-{volume}.img", 16 << 20)


def test_other_clouds_kms_unlock_and_rotation_rewraps_without_reformat(kms_node_image):
    with contextlib.ExitStack() as stack:
        kms = {}
        for cloud, _backend, _volume in CLOUD_VOLUMES:
            kms[cloud] = HostKms(cloud)
            stack.callback(kms[cloud].stop)
        name = stack.enter_context(node(kms_node_image, privileged=True))

        keys, headers = {}, {}
        for cloud, backend, volume in CLOUD_VOLUMES:
            converge(name, kms[cloud], backend, volume)
            keys[volume] = data_key(name, kms[cloud], volume)
            if backend == "luks":
                headers[volume] = header(name, volume)
        assert len(set(keys.values())) == len(CLOUD_VOLUMES), "each volume has its own data key"
        sh(name, "echo checkpoint > /data/ckpt/encrypted/state")

        # Rotation: the role with each cloud's second master key re-wraps
        # the same data key, and the volume opens with it.
        for cloud, backend, volume in CLOUD_VOLUMES:
            converge(name, kms[cloud], backend, volume, key=1)
            envelope = json.loads(sh(name, f"cat {ENVELOPE.format(volume)}").stdout)
            assert envelope["key_id"] == kms[cloud].keys[1], (cloud, envelope)
            assert data_key(name, kms[cloud], volume) == keys[volume], cloud
            if backend == "luks":
                assert header(name, volume) == headers[volume], f"{cloud}: the LUKS2 header was rewritten"
                sh(name, f"gpufleet-storage verify {volume}")
            else:
                assert unit(name, "restart", volume).returncode == 0, cloud
                assert sh(name, "cat /data/ckpt/encrypted/state").stdout == "checkpoint\n", cloud
        assert files_containing(name, *keys.values()) == []
