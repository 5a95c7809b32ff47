"""What the loopback KMS emulators share: a key ring that wraps data keys
under named master keys, and a threaded HTTP server bound to 127.0.0.1.

Emulators, not clouds: the wrapping is a keyed stream cipher built from the
standard library (SHA-256 keystream, HMAC-SHA256 tag), enough to make a
ciphertext useless without its master key and to reject a ciphertext shown
to the wrong key, which is what the tests need. Each provider file speaks
its cloud's documented request and response shapes to the official SDK.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import os
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAGIC = b"GFK1"


class KmsFault(Exception):
    """A refusal the emulator answers with the provider's error shape."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class KeyRing:
    """Master keys by id. ``disabled`` keys refuse every operation, as a
    disabled or scheduled-for-deletion key does in a real KMS."""

    def __init__(self, key_ids):
        self.secrets = {key_id: os.urandom(32) for key_id in key_ids}
        self.disabled: set[str] = set()
        self.calls: list[str] = []

    def _secret(self, key_id: str) -> bytes:
        if key_id not in self.secrets:
            raise KmsFault(404, "KeyNotFound", f"the key {key_id} does not exist")
        if key_id in self.disabled:
            raise KmsFault(400, "KeyDisabled", f"the key {key_id} is disabled")
        return self.secrets[key_id]

    @staticmethod
    def _stream(secret: bytes, nonce: bytes, length: int) -> bytes:
        out = b""
        counter = 0
        while len(out) < length:
            out += hashlib.sha256(secret + nonce + counter.to_bytes(4, "big")).digest()
            counter += 1
        return out[:length]

    def wrap(self, key_id: str, plaintext: bytes) -> bytes:
        secret = self._secret(key_id)
        nonce = os.urandom(16)
        body = bytes(a ^ b for a, b in zip(plaintext, self._stream(secret, nonce, len(plaintext))))
        kid = key_id.encode()
        head = MAGIC + len(kid).to_bytes(1, "big") + kid + nonce
        return head + body + hmac.new(secret, head + body, hashlib.sha256).digest()[:16]

    def unwrap(self, blob: bytes) -> tuple[str, bytes]:
        if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 1 + 16 + 16:
            raise KmsFault(400, "InvalidCiphertext", "the ciphertext was not made by this KMS")
        size = blob[len(MAGIC)]
        start = len(MAGIC) + 1
        key_id = blob[start:start + size].decode()
        nonce = blob[start + size:start + size + 16]
        body, tag = blob[start + size + 16:-16], blob[-16:]
        secret = self._secret(key_id)
        if not hmac.compare_digest(hmac.new(secret, blob[:-16], hashlib.sha256).digest()[:16], tag):
            raise KmsFault(400, "InvalidCiphertext", "the ciphertext does not verify under its key")
        return key_id, bytes(a ^ b for a, b in zip(body, self._stream(secret, nonce, len(body))))


def b64_blob(params) -> bytes:
    """The CiphertextBlob parameter (base64), as Alibaba and Tencent send it."""
    try:
        return base64.b64decode(params["CiphertextBlob"], validate=True)
    except (KeyError, ValueError):
        raise KmsFault(400, "InvalidParameter", "CiphertextBlob is missing or not base64") from None


def request_id() -> str:
    return str(uuid.uuid4())


class Handler(BaseHTTPRequestHandler):
    """Base handler: subclasses implement ``answer(body) -> (status, dict)``."""

    keyring: KeyRing
    # HTTP/1.0: one request a connection, so a stopped emulator is really
    # unreachable (no kept-alive connection outlives it).
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        if os.environ.get("GPUFLEET_EMULATOR_LOG"):
            super().log_message(format, *args)

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, text: str):
        data = text.encode()
        self.send_response(status)
        # Exactly this value: the Tencent SDK only parses errors under it.
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(handler: type[Handler], key_ids, port: int = 0, keyring: KeyRing | None = None) -> ThreadingHTTPServer:
    """A server for the keys; pass the keyring of a stopped server to bring
    the same KMS back (same master keys) on the same port."""
    keyring = keyring or KeyRing(key_ids)
    bound = type(handler.__name__, (handler,), {"keyring": keyring})
    # Loopback only: the emulators never listen beyond this machine.
    server = ThreadingHTTPServer(("127.0.0.1", port), bound)
    server.daemon_threads = True
    server.keyring = keyring
    return server


def serve_in_thread(server: ThreadingHTTPServer) -> ThreadingHTTPServer:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


@contextlib.contextmanager
def running(handler: type[Handler], key_ids, port: int = 0):
    """Serve in a thread; yields the server (``server.server_port``)."""
    server = serve_in_thread(make_server(handler, key_ids, port))
    try:
        yield server
    finally:
        stop(server)


def cli(handler: type[Handler], description: str, argv=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--key", action="append", required=True, help="a master key id (repeatable)")
    args = parser.parse_args(argv)
    server = make_server(handler, args.key, args.port)
    # The port on stdout lets a test that asked for port 0 find the server.
    print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit("run one of kms_aliyun.py, kms_tencent.py or kms_huawei.py")
