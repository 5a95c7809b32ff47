"""Loopback emulator of Alibaba Cloud KMS (API version 2016-01-20) for the
official SDK, alibabacloud_kms20160120.

RPC style: POST / with the action and its parameters in the query string
(or a form body), JSON answers with PascalCase fields, and errors as an
HTTP 4xx status with Code, Message and RequestId."""

from __future__ import annotations

import base64
import json
import os
import sys
from urllib.parse import parse_qs, urlsplit

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kms_common import Handler, KmsFault, b64_blob, cli, request_id  # pragma: no cover
else:
    from .kms_common import Handler, KmsFault, b64_blob, cli, request_id

CODES = {"KeyNotFound": "Forbidden.KeyNotFound", "KeyDisabled": "Rejected.Disabled", "InvalidCiphertext": "InvalidCiphertext"}


class AliyunKmsHandler(Handler):
    def do_POST(self):  # noqa: N802 - BaseHTTPRequestHandler's naming
        params = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        body = self.read_body().decode()
        if body and "form" in (self.headers.get("Content-Type") or ""):
            params.update({k: v[0] for k, v in parse_qs(body).items()})
        action = self.headers.get("x-acs-action") or params.get("Action")
        self.keyring.calls.append(action or "")
        if not self.headers.get("Authorization") and "Signature" not in params:
            return self.error(400, "MissingSignature", "the request is not signed")
        try:
            answer = {
                "GenerateDataKey": self.generate_data_key,
                "Decrypt": self.decrypt,
                "ReEncrypt": self.re_encrypt,
            }[action](params)
        except KeyError:
            return self.error(400, "InvalidAction.NotFound", f"unknown action {action}")
        except KmsFault as fault:
            return self.error(fault.status, CODES.get(fault.code, fault.code), fault.message)
        answer["RequestId"] = request_id()
        return self.send_json(200, json.dumps(answer))

    def error(self, status, code, message):
        self.send_json(status, json.dumps({"RequestId": request_id(), "HostId": "kms.emulator", "Code": code, "Message": message}))

    def generate_data_key(self, params):
        key_id = params.get("KeyId", "")
        size = int(params.get("NumberOfBytes") or (16 if params.get("KeySpec") == "AES_128" else 32))
        plaintext = os.urandom(size)
        blob = self.keyring.wrap(key_id, plaintext)
        return {
            "KeyId": key_id,
            "KeyVersionId": f"{key_id}-v1",
            "Plaintext": base64.b64encode(plaintext).decode(),
            "CiphertextBlob": base64.b64encode(blob).decode(),
        }

    def decrypt(self, params):
        key_id, plaintext = self.keyring.unwrap(b64_blob(params))
        return {"KeyId": key_id, "KeyVersionId": f"{key_id}-v1", "Plaintext": base64.b64encode(plaintext).decode()}

    def re_encrypt(self, params):
        _source, plaintext = self.keyring.unwrap(b64_blob(params))
        key_id = params.get("DestinationKeyId", "")
        blob = self.keyring.wrap(key_id, plaintext)
        return {"KeyId": key_id, "KeyVersionId": f"{key_id}-v1", "CiphertextBlob": base64.b64encode(blob).decode()}


if __name__ == "__main__":
    sys.exit(cli(AliyunKmsHandler, __doc__))
