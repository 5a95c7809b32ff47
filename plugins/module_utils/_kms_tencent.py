# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Tencent Cloud KMS adapter (tencentcloud-sdk-python-kms)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import traceback

from ._kms_envelope import KmsError, split_endpoint

try:
    from tencentcloud.common import credential
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from tencentcloud.kms.v20190118 import kms_client, models
except ImportError:
    HAS_SDK = False
    SDK_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_SDK = True
    SDK_IMPORT_ERROR = None

SDK = "tencentcloud-sdk-python-kms"
# Codes the SDK itself raises when no answer came back.
_TRANSPORT_CODES = ("ClientNetworkError", "ServerNetworkError")


class TencentKms:
    def __init__(self, region=None, endpoint=None, project_id=None, access_key=None, secret_key=None,
                 security_token=None, timeout=10):
        self.endpoint = endpoint or "kms.tencentcloudapi.com"
        protocol, host = split_endpoint(self.endpoint)
        if access_key:
            cred = credential.Credential(access_key, secret_key, security_token or None)
        else:
            # The SDK's default chain: environment, profile, CVM role.
            cred = credential.DefaultCredentialProvider().get_credential()
        profile = ClientProfile(httpProfile=HttpProfile(protocol=protocol, endpoint=host, reqTimeout=timeout))
        self.client = kms_client.KmsClient(cred, region or "", profile)

    def _call(self, operation, request):
        try:
            return getattr(self.client, operation)(request)
        except TencentCloudSDKException as exc:
            if exc.get_code() in _TRANSPORT_CODES:
                raise KmsError("unreachable", "Tencent Cloud KMS is unreachable (%s): %s" % (self.endpoint, exc.get_message()))
            raise KmsError("refused", "Tencent Cloud KMS refused %s: %s: %s" % (operation, exc.get_code(), exc.get_message()))

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
