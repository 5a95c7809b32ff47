from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils._kms_envelope import (
    FORMAT, Envelope, KmsError, split_endpoint, write_private)


def sample():
    return Envelope("tencent", "key-1", "Y2lwaGVy", 32, region="ap-guangzhou", endpoint="http://127.0.0.1:1")


def test_round_trip_keeps_every_field():
    env = Envelope.loads(sample().dumps())
    assert env.to_dict() == sample().to_dict()
    assert env.connection() == {"region": "ap-guangzhou", "endpoint": "http://127.0.0.1:1", "project_id": None}


def test_dumps_is_stable_and_holds_no_secret_fields():
    text = sample().dumps()
    assert text == sample().dumps()
    assert set(json.loads(text)) == {"format", "provider", "key_id", "key_bytes", "ciphertext", "region", "endpoint"}


@pytest.mark.parametrize("text, needle", [
    ("not json", "not JSON"),
    (json.dumps({"format": "other"}), FORMAT),
    (json.dumps({"format": FORMAT, "provider": "aws"}), "lacks"),
    (json.dumps({"format": FORMAT, "provider": "gcp", "key_id": "k", "ciphertext": "c", "key_bytes": 32}), "unknown KMS provider"),
])
def test_bad_envelopes_are_refused(text, needle):
    with pytest.raises(KmsError) as err:
        Envelope.loads(text)
    assert needle in str(err.value)
    assert err.value.kind == "invalid"


def test_write_private_is_0600_and_replaces_atomically(tmp_path):
    # A directory of its own: conftest puts a fake HOME in tmp_path.
    folder = tmp_path / "envelopes"
    folder.mkdir()
    path = folder / "e.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    write_private(str(path), "new\n")
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == ["e.json"]


@pytest.mark.parametrize("endpoint, expected", [
    ("http://127.0.0.1:8080/", ("http", "127.0.0.1:8080")),
    ("HTTPS://kms.cn-hangzhou.aliyuncs.com", ("https", "kms.cn-hangzhou.aliyuncs.com")),
    ("kms.tencentcloudapi.com", ("https", "kms.tencentcloudapi.com")),
])
def test_split_endpoint(endpoint, expected):
    assert split_endpoint(endpoint) == expected
