# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Alibaba Cloud KMS adapter (alibabacloud_kms20160120)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import traceback

from ._kms_envelope import KmsAdapter, split_endpoint

try:
    from alibabacloud_credentials.client import Client as CredentialClient
    from alibabacloud_kms20160120 import models
    from alibabacloud_kms20160120.client import Client
    from alibabacloud_tea_openapi.utils_models import Config
    from Tea.exceptions import TeaException
    SDK_IMPORT_ERROR = None
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
HAS_SDK = SDK_IMPORT_ERROR is None

SDK = "alibabacloud_kms20160120"


class AliyunKms(KmsAdapter):
    name = "Alibaba Cloud KMS"
    default_endpoint = "kms.%(region)s.aliyuncs.com"

    def connect(self):
        protocol, host = split_endpoint(self.endpoint)
        config = Config(region_id=self.region, endpoint=host, protocol=protocol,
                        connect_timeout=self.timeout * 1000, read_timeout=self.timeout * 1000)
        if self.access_key:
            config.access_key_id = self.access_key
            config.access_key_secret = self.secret_key
            config.security_token = self.security_token
        else:
            # The SDK's default chain: environment, profile, ECS RAM role.
            config.credential = CredentialClient()
        return Client(config)

    def _call(self, operation, request):
        try:
            return getattr(self.client, operation)(request).body
        except TeaException as exc:
            # An error the KMS answered with carries its HTTP status; the
            # SDK's transport failures (connection refused, timeout) do not.
            if getattr(exc, "status_code", None) is not None:
                raise self.refused(operation, exc.code, exc.message)
            raise self.unreachable(exc)
        except Exception as exc:  # pylint: disable=broad-except
            # Transport errors the SDK lets through unwrapped (requests, sockets).
            raise self.unreachable(exc)

    def generate(self, key_id, key_bytes):
        body = self._call("generate_data_key", models.GenerateDataKeyRequest(key_id=key_id, number_of_bytes=key_bytes))
        return base64.b64decode(body.plaintext), body.ciphertext_blob, body.key_id

    def decrypt(self, envelope):
        # Alibaba's Decrypt reads the key from the blob itself.
        body = self._call("decrypt", models.DecryptRequest(ciphertext_blob=envelope.ciphertext))
        return base64.b64decode(body.plaintext)

    def reencrypt(self, envelope, key_id):
        body = self._call(
            "re_encrypt", models.ReEncryptRequest(ciphertext_blob=envelope.ciphertext, destination_key_id=key_id)
        )
        return body.ciphertext_blob, body.key_id
