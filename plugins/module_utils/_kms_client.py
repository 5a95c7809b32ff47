# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Pick the adapter for a provider, and the KMS operations on envelopes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from . import _kms_aliyun, _kms_aws, _kms_huawei, _kms_tencent
from ._kms_envelope import Envelope, KmsError

ADAPTERS = {
    "aws": (_kms_aws, _kms_aws.AwsKms if _kms_aws.HAS_SDK else None),
    "aliyun": (_kms_aliyun, _kms_aliyun.AliyunKms if _kms_aliyun.HAS_SDK else None),
    "tencent": (_kms_tencent, _kms_tencent.TencentKms if _kms_tencent.HAS_SDK else None),
    "huawei": (_kms_huawei, _kms_huawei.HuaweiKms if _kms_huawei.HAS_SDK else None),
}


def sdk_status(provider):
    """(sdk name, import error or None) for a provider."""
    module = ADAPTERS[provider][0]
    return module.SDK, module.SDK_IMPORT_ERROR


def client(provider, **connection):
    if provider not in ADAPTERS:
        raise KmsError("invalid", "unknown KMS provider %r" % provider)
    cls = ADAPTERS[provider][1]
    if cls is None:
        raise KmsError("invalid", "the %s SDK is not installed: %s" % sdk_status(provider))
    return cls(**connection)


def generate(provider, key_id, key_bytes, region=None, endpoint=None, project_id=None, **credentials):
    """A new data key: (plaintext bytes, Envelope)."""
    kms = client(provider, region=region, endpoint=endpoint, project_id=project_id, **credentials)
    plaintext, ciphertext, _resolved = kms.generate(key_id, key_bytes)
    if len(plaintext) != key_bytes:
        raise KmsError("refused", "KMS returned a %d-byte key, not %d bytes" % (len(plaintext), key_bytes))
    envelope = Envelope(provider, key_id, ciphertext, key_bytes, region=region, endpoint=endpoint, project_id=project_id)
    return plaintext, envelope


def decrypt(envelope, **credentials):
    kms = client(envelope.provider, **dict(envelope.connection(), **credentials))
    plaintext = kms.decrypt(envelope)
    if len(plaintext) != envelope.key_bytes:
        raise KmsError("refused", "KMS returned a %d-byte key, the envelope says %d" % (len(plaintext), envelope.key_bytes))
    return plaintext


def reencrypt(envelope, key_id, **credentials):
    """The same data key wrapped under key_id: a new Envelope. The old one
    is left as it was, so a caller can verify before replacing it."""
    kms = client(envelope.provider, **dict(envelope.connection(), **credentials))
    ciphertext, _resolved = kms.reencrypt(envelope, key_id)
    connection = envelope.connection()
    return Envelope(envelope.provider, key_id, ciphertext, envelope.key_bytes, **connection)
