# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""AWS KMS adapter (boto3). See _kms_envelope for the shared contract."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import traceback

from ._kms_envelope import KmsError

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import (BotoCoreError, ClientError, ConnectionClosedError, ConnectTimeoutError,
                                     EndpointConnectionError, ReadTimeoutError)
except ImportError:
    HAS_SDK = False
    SDK_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_SDK = True
    SDK_IMPORT_ERROR = None

SDK = "boto3"


class AwsKms:
    def __init__(self, region=None, endpoint=None, project_id=None, access_key=None, secret_key=None,
                 security_token=None, timeout=10):
        self.endpoint = endpoint
        # Short timeouts and one retry: at boot a dead endpoint must fail in
        # seconds with a clear message, not hang for botocore's 60 s default.
        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 2, "mode": "standard"})
        # No keys given: boto3's own chain (environment, profile, instance role).
        session = boto3.session.Session(
            aws_access_key_id=access_key or None,
            aws_secret_access_key=secret_key or None,
            aws_session_token=security_token or None,
            region_name=region or None,
        )
        self.client = session.client("kms", endpoint_url=endpoint or None, config=config)

    def _call(self, operation, **kwargs):
        try:
            return getattr(self.client, operation)(**kwargs)
        except (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError) as exc:
            raise KmsError("unreachable", "AWS KMS is unreachable (%s): %s" % (self.endpoint or "default endpoint", exc))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise KmsError("refused", "AWS KMS refused %s: %s: %s" % (operation, error.get("Code"), error.get("Message")))
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
