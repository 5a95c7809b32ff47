"""Loopback emulator of Huawei Cloud DEW KMS (v1.0 API) for the official
SDK, huaweicloudsdkkms.

REST style: POST /v1.0/{project_id}/kms/<operation> with a JSON body of
snake_case fields; keys and ciphertexts are hexadecimal strings. Errors are
an HTTP 4xx status with {"error": {"error_code", "error_msg"}}."""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import re
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kms_common import Handler, KmsFault, cli, request_id  # pragma: no cover
else:
    from .kms_common import Handler, KmsFault, cli, request_id

PATH = re.compile(r"^/v1\.0/(?P<project>[0-9a-zA-Z]+)/kms/(?P<op>[a-z-]+)$")
CODES = {"KeyNotFound": "KMS.0207", "KeyDisabled": "KMS.0205", "InvalidCiphertext": "KMS.0204"}


class HuaweiKmsHandler(Handler):
    def do_POST(self):  # noqa: N802 - BaseHTTPRequestHandler's naming
        match = PATH.match(self.path.split("?")[0])
        op = match.group("op") if match else ""
        self.keyring.calls.append(op)
        if not (self.headers.get("Authorization") or "").startswith("SDK-HMAC-SHA256"):
            return self.error(401, "APIGW.0301", "the request is not signed with SDK-HMAC-SHA256")
        handlers = {"create-datakey": self.create, "decrypt-datakey": self.decrypt, "encrypt-datakey": self.encrypt}
        if op not in handlers:
            return self.error(404, "APIGW.0101", f"no such API: {self.path}")
        try:
            answer = handlers[op](json.loads(self.read_body() or b"{}"))
        except KmsFault as fault:
            return self.error(fault.status, CODES.get(fault.code, "KMS.0201"), fault.message)
        except (ValueError, KeyError) as exc:
            return self.error(400, "KMS.0201", f"invalid request: {exc}")
        return self.send_json(200, json.dumps(answer))

    def error(self, status, code, message):
        self.send_json(status, json.dumps({"error": {"error_code": code, "error_msg": message}, "request_id": request_id()}))

    def _unwrap(self, params):
        try:
            blob = binascii.unhexlify(params["cipher_text"])
        except (binascii.Error, ValueError):
            raise KmsFault(400, "InvalidCiphertext", "cipher_text is not hexadecimal") from None
        key_id, plaintext = self.keyring.unwrap(blob)
        # DEW's decrypt names the key: a ciphertext of another key is refused.
        if key_id != params["key_id"]:
            raise KmsFault(400, "InvalidCiphertext", f"the ciphertext belongs to another key than {params['key_id']}")
        return plaintext

    def create(self, params):
        bits = int(params.get("datakey_length") or 512)
        if bits % 8 or not 8 <= bits <= 8192:
            raise KmsFault(400, "InvalidParameter", "datakey_length must be a multiple of 8 from 8 to 8192")
        plaintext = os.urandom(bits // 8)
        blob = self.keyring.wrap(params["key_id"], plaintext)
        return {
            "key_id": params["key_id"],
            "plain_text": binascii.hexlify(plaintext).decode(),
            "cipher_text": binascii.hexlify(blob).decode(),
        }

    def decrypt(self, params):
        plaintext = self._unwrap(params)
        if int(params["datakey_cipher_length"]) != len(plaintext):
            raise KmsFault(400, "InvalidParameter", "datakey_cipher_length does not match the key")
        return {
            "data_key": binascii.hexlify(plaintext).decode(),
            "datakey_length": str(len(plaintext)),
            "datakey_dgst": hashlib.sha256(plaintext).hexdigest(),
        }

    def encrypt(self, params):
        # plain_text is the key followed by its SHA-256 digest, in hex.
        raw = binascii.unhexlify(params["plain_text"])
        size = int(params["datakey_plain_length"])
        plaintext, digest = raw[:size], raw[size:]
        if hashlib.sha256(plaintext).digest() != digest:
            raise KmsFault(400, "InvalidParameter", "plain_text must be the key followed by its SHA-256 digest")
        blob = self.keyring.wrap(params["key_id"], plaintext)
        return {"key_id": params["key_id"], "cipher_text": binascii.hexlify(blob).decode(), "datakey_length": str(size)}


if __name__ == "__main__":
    sys.exit(cli(HuaweiKmsHandler, __doc__))
