# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Tencent Cloud KMS adapter (tencentcloud-sdk-python-kms)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import traceback

from ._kms_envelope import KmsAdapter, split_endpoint

try:
    from tencentcloud.common import credential
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from tencentcloud.kms.v20190118 import kms_client, models
    SDK_IMPORT_ERROR = None
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
HAS_SDK = SDK_IMPORT_ERROR is None

SDK = "tencentcloud-sdk-python-kms"
# Codes the SDK itself raises when no answer came back.
_TRANSPORT_CODES = ("ClientNetworkError", "ServerNetworkError")


class TencentKms(KmsAdapter):
    name = "Tencent Cloud KMS"
    default_endpoint = "kms.tencentcloudapi.com"

    def connect(self):
        protocol, host = split_endpoint(self.endpoint)
        if self.access_key:
            cred = credential.Credential(self.access_key, self.secret_key, self.security_token)
        else:
            # The SDK's default chain: environment, profile, CVM role.
            cred = credential.DefaultCredentialProvider().get_credential()
        profile = ClientProfile(httpProfile=HttpProfile(protocol=protocol, endpoint=host, reqTimeout=self.timeout))
        return kms_client.KmsClient(cred, self.region or "", profile)

    def _call(self, operation, request):
        try:
            return getattr(self.client, operation)(request)
        except TencentCloudSDKException as exc:
            if exc.get_code() in _TRANSPORT_CODES:
                raise self.unreachable(exc.get_message())
            raise self.refused(operation, exc.get_code(), exc.get_message())

    def generate(self, key_id, key_bytes):
        request = models.GenerateDataKeyRequest()
        request.KeyId = key_id
        request.NumberOfBytes = key_bytes
        out = self._call("GenerateDataKey", request)
        return base64.b64decode(out.Plaintext), out.CiphertextBlob, out.KeyId

    def decrypt(self, envelope):
        request = models.DecryptRequest()
        request.CiphertextBlob = envelope.ciphertext
        return base64.b64decode(self._call("Decrypt", request).Plaintext)

    def reencrypt(self, envelope, key_id):
        request = models.ReEncryptRequest()
        request.CiphertextBlob = envelope.ciphertext
        request.DestinationKeyId = key_id
        out = self._call("ReEncrypt", request)
        return out.CiphertextBlob, out.KeyId
