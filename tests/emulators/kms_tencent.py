"""Loopback emulator of Tencent Cloud KMS (API version 2019-01-18) for the
official SDK, tencentcloud-sdk-python-kms.

API 3.0: POST / with a JSON body, the action in the X-TC-Action header and
a TC3-HMAC-SHA256 Authorization header; every answer is HTTP 200 with
{"Response": {...}}, and an error is {"Response": {"Error": {"Code",
"Message"}, "RequestId"}}."""

from __future__ import annotations

import base64
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kms_common import Handler, KmsFault, b64_blob, cli, request_id  # pragma: no cover
else:
    from .kms_common import Handler, KmsFault, b64_blob, cli, request_id

CODES = {
    "KeyNotFound": "ResourceUnavailable.CmkNotFound",
    "KeyDisabled": "ResourceUnavailable.CmkDisabled",
    "InvalidCiphertext": "InvalidParameterValue.InvalidCiphertext",
}


class TencentKmsHandler(Handler):
    def do_POST(self):  # noqa: N802 - BaseHTTPRequestHandler's naming
        action = self.headers.get("X-TC-Action", "")
        self.keyring.calls.append(action)
        try:
            params = json.loads(self.read_body() or b"{}")
        except ValueError:
            return self.error("InvalidParameter", "the body is not JSON")
        if not (self.headers.get("Authorization") or "").startswith("TC3-HMAC-SHA256"):
            return self.error("AuthFailure.SignatureFailure", "the request is not signed with TC3-HMAC-SHA256")
        handlers = {"GenerateDataKey": self.generate_data_key, "Decrypt": self.decrypt, "ReEncrypt": self.re_encrypt}
        if action not in handlers:
            return self.error("InvalidAction", f"unknown action {action}")
        try:
            answer = handlers[action](params)
        except KmsFault as fault:
            return self.error(CODES.get(fault.code, fault.code), fault.message)
        answer["RequestId"] = request_id()
        return self.send_json(200, json.dumps({"Response": answer}))

    def error(self, code, message):
        self.send_json(200, json.dumps({"Response": {"Error": {"Code": code, "Message": message}, "RequestId": request_id()}}))

    def generate_data_key(self, params):
        key_id = params.get("KeyId", "")
        size = int(params.get("NumberOfBytes") or (16 if params.get("KeySpec") == "AES_128" else 32))
        plaintext = os.urandom(size)
        return {
            "KeyId": key_id,
            "Plaintext": base64.b64encode(plaintext).decode(),
            "CiphertextBlob": base64.b64encode(self.keyring.wrap(key_id, plaintext)).decode(),
        }

    def decrypt(self, params):
        key_id, plaintext = self.keyring.unwrap(b64_blob(params))
        return {"KeyId": key_id, "Plaintext": base64.b64encode(plaintext).decode()}

    def re_encrypt(self, params):
        source, plaintext = self.keyring.unwrap(b64_blob(params))
        key_id = params.get("DestinationKeyId") or source
        return {
            "CiphertextBlob": base64.b64encode(self.keyring.wrap(key_id, plaintext)).decode(),
            "KeyId": key_id,
            "SourceKeyId": source,
            "ReEncrypted": True,
        }


if __name__ == "__main__":
    sys.exit(cli(TencentKmsHandler, __doc__))
