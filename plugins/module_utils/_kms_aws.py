# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""AWS KMS adapter (boto3). See _kms_envelope for the shared contract."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import traceback

from ._kms_envelope import KmsAdapter, KmsError

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import (BotoCoreError, ClientError, ConnectionClosedError, ConnectTimeoutError,
                                     EndpointConnectionError, ReadTimeoutError)
    SDK_IMPORT_ERROR = None
except ImportError:
    SDK_IMPORT_ERROR = traceback.format_exc()
HAS_SDK = SDK_IMPORT_ERROR is None

SDK = "boto3"


class AwsKms(KmsAdapter):
    name = "AWS KMS"

    def connect(self):
        # Short timeouts and one retry: at boot a dead endpoint must fail in
        # seconds with a clear message, not hang for botocore's 60 s default.
        config = Config(connect_timeout=self.timeout, read_timeout=self.timeout,
                        retries={"max_attempts": 2, "mode": "standard"})
        session = boto3.session.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            aws_session_token=self.security_token,
            region_name=self.region or None,
        )
        return session.client("kms", endpoint_url=self.endpoint, config=config)

    def _call(self, operation, **kwargs):
        try:
            return getattr(self.client, operation)(**kwargs)
        except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError) as exc:
            raise self.unreachable(exc)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise self.refused(operation, error.get("Code"), error.get("Message"))
        except BotoCoreError as exc:
            # NoCredentialsError, NoRegionError and the like: local setup.
            raise KmsError("refused", "AWS KMS %s failed: %s" % (operation, exc))

    def generate(self, key_id, key_bytes):
        out = self._call("generate_data_key", KeyId=key_id, NumberOfBytes=key_bytes)
        return out["Plaintext"], base64.b64encode(out["CiphertextBlob"]).decode("ascii"), out["KeyId"]

    def decrypt(self, envelope):
        # Naming the key makes KMS refuse a ciphertext made under another key.
        out = self._call("decrypt", CiphertextBlob=base64.b64decode(envelope.ciphertext), KeyId=envelope.key_id)
        return out["Plaintext"]

    def reencrypt(self, envelope, key_id):
        # Done inside KMS: the plaintext never leaves it.
        out = self._call(
            "re_encrypt",
            CiphertextBlob=base64.b64decode(envelope.ciphertext),
            SourceKeyId=envelope.key_id,
            DestinationKeyId=key_id,
        )
        return base64.b64encode(out["CiphertextBlob"]).decode("ascii"), out["KeyId"]
