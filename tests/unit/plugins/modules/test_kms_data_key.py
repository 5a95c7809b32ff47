"""kms_data_key end to end in-process, against each provider's KMS."""

from __future__ import annotations

import base64
import json
import stat

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.module_utils import _kms_client
from ansible_collections.gpufleet.cloud.plugins.module_utils._kms_envelope import Envelope
from ansible_collections.gpufleet.cloud.plugins.modules import kms_data_key

from ..kms_fixtures import CREDS


WARNINGS: list[str] = []


class Exit(Exception):
    def __init__(self, result, failed):
        super().__init__(result)
        self.result = result
        self.failed = failed


@pytest.fixture(autouse=True)
def capture(monkeypatch):
    def exit_json(self, **kwargs):
        raise Exit(kwargs, False)

    def fail_json(self, **kwargs):
        raise Exit(kwargs, True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: WARNINGS.append(msg))
    WARNINGS.clear()


def run(args, check=False, diff=False, no_log=False):
    args = dict(args, _ansible_check_mode=check, _ansible_diff=diff, _ansible_no_log=no_log)
    with patch_module_args(args), pytest.raises(Exit) as done:
        kms_data_key.main()
    return done.value


def base_args(kms, **more):
    args = dict(provider=kms.provider, access_key=CREDS["access_key"], secret_key=CREDS["secret_key"], timeout=3)
    args.update({k: v for k, v in kms.connection.items() if v})
    args.update(more)
    return args


def plaintext_of(path):
    return _kms_client.decrypt(Envelope.load(str(path)), **CREDS)


def test_generate_writes_only_the_envelope_once(kms, tmp_path):
    path = tmp_path / "data.envelope"
    first = run(base_args(kms, key_id=kms.keys[0], path=str(path)), diff=True)
    assert not first.failed and first.result["changed"]
    assert "plaintext" not in first.result
    assert first.result["diff"]["after"]["key_id"] == kms.keys[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = plaintext_of(path)
    text = path.read_text()
    for form in (key.hex(), base64.b64encode(key).decode()):
        assert form not in text and form not in json.dumps(first.result)
    # Generated once: a second run keeps the key.
    second = run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    assert not second.result["changed"]
    assert plaintext_of(path) == key


def test_generate_in_check_mode_calls_nothing_and_writes_nothing(kms, tmp_path):
    path = tmp_path / "data.envelope"
    kms.stop()  # any KMS call would now fail
    out = run(base_args(kms, key_id=kms.keys[0], path=str(path), endpoint=kms.connection["endpoint"]), check=True)
    assert not out.failed and out.result["changed"]
    assert not path.exists()


def test_generate_keeps_an_envelope_of_another_key_and_warns(kms, tmp_path):
    path = tmp_path / "data.envelope"
    run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    before = path.read_text()
    out = run(base_args(kms, key_id=kms.keys[1], path=str(path)))
    assert not out.result["changed"]
    assert any("reencrypt" in w for w in WARNINGS)
    assert path.read_text() == before


def test_reencrypt_rewraps_the_same_key(kms, tmp_path):
    path = tmp_path / "data.envelope"
    run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    key = plaintext_of(path)
    check = run(base_args(kms, operation="reencrypt", key_id=kms.keys[1], path=str(path)), check=True, diff=True)
    assert check.result["changed"] and check.result["diff"] == {"before": {"key_id": kms.keys[0]}, "after": {"key_id": kms.keys[1]}}
    assert Envelope.load(str(path)).key_id == kms.keys[0]
    out = run(base_args(kms, operation="reencrypt", key_id=kms.keys[1], path=str(path)))
    assert out.result["changed"] and out.result["key_id"] == kms.keys[1]
    assert Envelope.load(str(path)).key_id == kms.keys[1]
    assert plaintext_of(path) == key
    assert not run(base_args(kms, operation="reencrypt", key_id=kms.keys[1], path=str(path))).result["changed"]


def test_reencrypt_takes_the_connection_from_the_envelope(kms, tmp_path):
    # The role passes only provider, key and credentials when re-wrapping.
    path = tmp_path / "data.envelope"
    run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    key = plaintext_of(path)
    args = dict(provider=kms.provider, operation="reencrypt", key_id=kms.keys[1], path=str(path),
                access_key=CREDS["access_key"], secret_key=CREDS["secret_key"], timeout=3)
    out = run(args)
    assert not out.failed, out.result
    assert plaintext_of(path) == key


def test_decrypt_returns_the_key_only_under_no_log(kms, tmp_path):
    path = tmp_path / "data.envelope"
    run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    refused = run(base_args(kms, operation="decrypt", path=str(path), return_plaintext=True))
    assert refused.failed and "no_log" in refused.result["msg"]
    out = run(base_args(kms, operation="decrypt", path=str(path), return_plaintext=True), no_log=True)
    assert not out.failed and not out.result["changed"]
    assert base64.b64decode(out.result["plaintext"]) == plaintext_of(path)
    plain = run(base_args(kms, operation="decrypt", path=str(path)))
    assert "plaintext" not in plain.result


def test_kms_errors_fail_with_their_kind(kms, tmp_path):
    path = tmp_path / "data.envelope"
    run(base_args(kms, key_id=kms.keys[0], path=str(path)))
    kms.stop()
    env = Envelope.load(str(path))
    env.endpoint = kms.connection["endpoint"]
    out = run(base_args(kms, operation="decrypt", envelope=env.dumps()))
    assert out.failed and out.result["kms_error"] == "unreachable"


def test_provider_must_match_the_envelope(tmp_path):
    path = tmp_path / "e"
    path.write_text(Envelope("aws", "k", "Y2lwaGVy", 32).dumps())
    out = run(dict(provider="aliyun", operation="decrypt", path=str(path)))
    assert out.failed and "provider aws" in out.result["msg"]


def test_missing_sdk_uses_missing_required_lib(monkeypatch, tmp_path):
    missing = type("Missing", (), {"SDK": "tencentcloud-sdk-python-kms", "SDK_IMPORT_ERROR": "ImportError"})
    monkeypatch.setitem(_kms_client.ADAPTERS, "tencent", (missing, None))
    out = run(dict(provider="tencent", key_id="k", path=str(tmp_path / "e")))
    assert out.failed and "tencentcloud-sdk-python-kms" in out.result["msg"]
