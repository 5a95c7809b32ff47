"""Each provider's adapter against its KMS: moto for AWS, the loopback
emulators (tests/emulators) for Alibaba, Tencent and Huawei, all through
the official SDKs."""

from __future__ import annotations

import base64
import binascii

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _kms_client
from ansible_collections.gpufleet.cloud.plugins.module_utils._kms_envelope import Envelope, KmsError

from ..kms_fixtures import CREDS


def test_generate_then_decrypt_gives_the_same_key(kms):
    plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    assert len(plaintext) == 32
    assert env.key_id == kms.keys[0] and env.provider == kms.provider
    # The envelope carries only ciphertext: the key is nowhere in it.
    assert plaintext.hex() not in env.dumps() and plaintext not in env.dumps().encode()
    assert _kms_client.decrypt(Envelope.loads(env.dumps()), **CREDS) == plaintext


def test_reencrypt_moves_the_same_key_to_another_master_key(kms):
    plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    moved = _kms_client.reencrypt(env, kms.keys[1], **CREDS)
    assert moved.key_id == kms.keys[1]
    assert moved.ciphertext != env.ciphertext
    assert _kms_client.decrypt(moved, **CREDS) == plaintext


def test_a_disabled_master_key_is_a_refusal(kms_with_key_states):
    kms = kms_with_key_states
    _plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    kms.disable(kms.keys[0])
    with pytest.raises(KmsError) as err:
        _kms_client.decrypt(env, **CREDS)
    assert err.value.kind == "refused"


def _tampered(env):
    """The envelope's ciphertext with its last byte flipped."""
    if env.provider == "huawei":
        raw = bytearray(binascii.unhexlify(env.ciphertext))
        raw[-1] ^= 1
        return binascii.hexlify(bytes(raw)).decode()
    raw = bytearray(base64.b64decode(env.ciphertext))
    raw[-1] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_a_tampered_ciphertext_is_refused(kms):
    _plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    env.ciphertext = _tampered(env)
    with pytest.raises(KmsError) as err:
        _kms_client.decrypt(env, **CREDS)
    assert err.value.kind == "refused"


def test_a_ciphertext_shown_to_the_wrong_key_is_refused(kms_naming_key):
    kms = kms_naming_key
    _plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    env.key_id = kms.keys[1]
    with pytest.raises(KmsError) as err:
        _kms_client.decrypt(env, **CREDS)
    assert err.value.kind == "refused"


def test_an_unreachable_kms_is_told_apart(kms):
    _plaintext, env = _kms_client.generate(kms.provider, kms.keys[0], 32, **kms.connection, **CREDS)
    kms.stop()
    env.endpoint = kms.connection["endpoint"]
    with pytest.raises(KmsError) as err:
        _kms_client.decrypt(env, **CREDS)
    assert err.value.kind == "unreachable"
    assert "unreachable" in str(err.value)


def test_unknown_provider():
    with pytest.raises(KmsError) as err:
        _kms_client.client("gcp")
    assert err.value.kind == "invalid"
