# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Huawei Cloud DEW KMS adapter (huaweicloudsdkkms).

DEW speaks hexadecimal: plain_text and cipher_text are hex strings, and
encrypt-datakey wants the plaintext followed by its SHA-256 digest. DEW has
no re-encrypt call, so a re-wrap decrypts and encrypts again inside this
process; the plaintext exists only in memory for that moment."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import hashlib
import traceback

from ._kms_envelope import KmsAdapter, KmsError

try:
    from huaweicloudsdkcore.auth.credentials import BasicCredentials
    from huaweicloudsdkcore.auth.provider import CredentialProviderChain
    from huaweicloudsdkcore.exceptions import exceptions as hw_exceptions
    from huaweicloudsdkcore.http.http_config import HttpConfig
    from requests.exceptions import RequestException
    from huaweicloudsdkkms.v2 import (CreateDatakeyRequest, CreateDatakeyRequestBody, DecryptDatakeyRequest,
                                      DecryptDatakeyRequestBody, EncryptDatakeyRequest, EncryptDatakeyRequestBody,
                                      KmsClient)
    SDK_IMPORT_ERROR = None
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
HAS_SDK = SDK_IMPORT_ERROR is None

SDK = "huaweicloudsdkkms"


class HuaweiKms(KmsAdapter):
    name = "Huawei Cloud KMS"
    default_endpoint = "https://kms.%(region)s.myhuaweicloud.com"

    def connect(self):
        config = HttpConfig.get_default_config()
        config.timeout = (self.timeout, self.timeout)
        builder = KmsClient.new_builder().with_http_config(config).with_endpoint(self.endpoint)
        project_id = self.project_id
        if self.access_key:
            creds = BasicCredentials(self.access_key, self.secret_key, project_id)
            if self.security_token:
                creds = creds.with_security_token(self.security_token)
            builder = builder.with_credentials(creds)
        elif project_id:
            # The SDK's chain (environment, profile, ECS metadata for the
            # instance's agency) finds the keys; DEW's paths also need the
            # project, which the envelope records.
            creds = CredentialProviderChain.get_basic_credential_provider_chain().get_credentials()
            creds.project_id = creds.project_id or project_id
            builder = builder.with_credentials(creds)
        return builder.build()

    def _call(self, operation, request):
        try:
            return getattr(self.client, operation)(request)
        except hw_exceptions.ServiceResponseException as exc:
            raise self.refused(operation, exc.error_code, exc.error_msg)
        except (hw_exceptions.ConnectionException, hw_exceptions.RequestTimeoutException) as exc:
            raise self.unreachable(exc.error_msg)
        except RequestException as exc:
            # Read timeouts reach us from requests unwrapped.
            raise self.unreachable(exc)

    def generate(self, key_id, key_bytes):
        body = CreateDatakeyRequestBody(key_id=key_id, datakey_length=str(key_bytes * 8))
        out = self._call("create_datakey", CreateDatakeyRequest(body=body))
        return binascii.unhexlify(out.plain_text), out.cipher_text, out.key_id

    def decrypt(self, envelope):
        body = DecryptDatakeyRequestBody(
            key_id=envelope.key_id, cipher_text=envelope.ciphertext, datakey_cipher_length=str(envelope.key_bytes)
        )
        out = self._call("decrypt_datakey", DecryptDatakeyRequest(body=body))
        plaintext = binascii.unhexlify(out.data_key)
        # DEW returns the key's SHA-256 beside it: check the key arrived whole.
        if out.datakey_dgst and hashlib.sha256(plaintext).hexdigest() != out.datakey_dgst.lower():
            raise KmsError("refused", "Huawei Cloud KMS returned a data key whose digest does not match")
        return plaintext

    def reencrypt(self, envelope, key_id):
        plaintext = self.decrypt(envelope)
        body = EncryptDatakeyRequestBody(
            key_id=key_id,
            plain_text=binascii.hexlify(plaintext + hashlib.sha256(plaintext).digest()).decode("ascii"),
            datakey_plain_length=str(len(plaintext)),
        )
        out = self._call("encrypt_datakey", EncryptDatakeyRequest(body=body))
        return out.cipher_text, out.key_id
