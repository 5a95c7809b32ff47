"""Instance metadata services of AWS, Alibaba, Tencent and Huawei on the
host's loopback, for the guard's spot notices, with the faults a real one
shows: a hang past the client's timeout, HTTP 500, a body that does not
parse, a dropped connection, and tokens that expire.

AWS's behaviour follows amazon-ec2-metadata-mock, which mirrors IMDS: the
token PUT needs a TTL header from 1 to 21600 (else 400), a read without a
valid token is 401 when IMDSv2 is required, and "nothing scheduled" is a
404. Alibaba's hardened mode is the same with its own header names.
Tencent has no token and writes its time in UTC+8. Huawei's service has
no spot item at all: only OpenStack's meta_data.json. Set ``notice`` (the
notice path's body), ``rebalance`` and ``maintenance`` (AWS only: the
scheduled events' JSON list) to what the cloud would say; None is the 404
of nothing scheduled. Run as a process on a test
node, it reads its notice and its fault from files (--notice-file,
--fault-file) that the test writes there."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer

from tests.emulators import kms_common

NOTICE_PATHS = {
    "aws": "/latest/meta-data/spot/instance-action",
    "aliyun": "/latest/meta-data/instance/spot/termination-time",
    "tencent": "/latest/meta-data/spot/termination-time",
}
REBALANCE_PATH = "/latest/meta-data/events/recommendations/rebalance"
MAINTENANCE_PATH = "/latest/meta-data/events/maintenance/scheduled"
TOKEN_HEADERS = {
    "aws": ("X-aws-ec2-metadata-token-ttl-seconds", "X-aws-ec2-metadata-token"),
    "aliyun": ("X-aliyun-ecs-metadata-token-ttl-seconds", "X-aliyun-ecs-metadata-token"),
}
AWS_404 = ('<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head><title>404 - Not Found</title></head>'
           "<body><h1>404 - Not Found</h1></body></html>\n")


class Metadata:
    """What the service says and how it fails; tests change it while the
    server runs. ``fault`` applies to every read (and ``empty-token`` to
    the token PUT); ``calls`` records (method, path, status)."""

    def __init__(self, cloud: str, require_token: bool | None = None, hang_seconds: float = 3.0):
        if cloud not in ("aws", "aliyun", "tencent", "huawei"):
            raise ValueError(f"unknown cloud {cloud!r}")
        self.cloud = cloud
        self.require_token = cloud == "aws" if require_token is None else require_token
        self.notice: str | None = None
        # A file whose content, when it exists, is the notice: a process on
        # a test node gets its notice from a file the test writes there.
        self.notice_file: str | None = None
        self.rebalance: str | None = None
        self.maintenance: str | None = None
        # Likewise the scheduled maintenance events (AWS).
        self.maintenance_file: str | None = None
        self.fault: str | None = None
        # A file whose content, when it exists, is the fault: how a test
        # fails the service of a process on a test node.
        self.fault_file: str | None = None
        self.hang_seconds = hang_seconds
        self.tokens: dict[str, float] = {}
        self.calls: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()

    def current_fault(self) -> str | None:
        if self.fault_file:
            try:
                with open(self.fault_file, encoding="utf-8") as handle:
                    return handle.read().strip() or None
            except FileNotFoundError:
                return self.fault
        return self.fault

    def expire_tokens(self) -> None:
        with self.lock:
            self.tokens = dict.fromkeys(self.tokens, 0.0)


class Handler(kms_common.Handler):
    """The loopback emulators' base handler: one request a connection, and
    quiet unless GPUFLEET_EMULATOR_LOG is set."""

    metadata: Metadata

    def _send(self, status: int, body: str, content_type: str = "text/plain") -> None:
        # Recorded before the answer goes out: once the client has it, a
        # test that reads ``calls`` must find it, however the threads ran.
        with self.metadata.lock:
            self.metadata.calls.append((self.command, self.path, status))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):  # noqa: N802 - the stdlib's name
        meta = self.metadata
        headers = TOKEN_HEADERS.get(meta.cloud)
        if headers is None or self.path != "/latest/api/token":
            return self._send(404, AWS_404, "text/html")
        try:
            ttl = int(self.headers.get(headers[0], ""))
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= 21600:
            return self._send(400, "the token TTL must be from 1 to 21600 seconds")
        if meta.current_fault() == "empty-token":
            return self._send(200, "")
        token = uuid.uuid4().hex
        with meta.lock:
            meta.tokens[token] = time.time() + ttl
        return self._send(200, token)

    def do_GET(self):  # noqa: N802 - the stdlib's name
        meta = self.metadata
        fault = meta.current_fault()
        if fault == "hang":
            time.sleep(meta.hang_seconds)
        if fault == "drop":
            self.close_connection = True
            self.connection.close()
            return None
        if fault == "500":
            return self._send(500, "Internal Server Error")
        headers = TOKEN_HEADERS.get(meta.cloud)
        if headers and (meta.require_token or self.headers.get(headers[1]) is not None):
            expiry = meta.tokens.get(self.headers.get(headers[1], ""), 0.0)
            if expiry <= time.time():
                return self._send(401, "")
        if meta.cloud == "huawei":
            if self.path == "/openstack/latest/meta_data.json":
                return self._send(200, json.dumps({"uuid": "0f5d0f3e", "availability_zone": "cn-north-4a"}),
                                  "application/json")
            return self._send(404, "Not Found")
        body = None
        if self.path == NOTICE_PATHS[meta.cloud]:
            body = _from_file(meta.notice_file, meta.notice)
        elif meta.cloud == "aws" and self.path == REBALANCE_PATH:
            body = meta.rebalance
        elif meta.cloud == "aws" and self.path == MAINTENANCE_PATH:
            body = _from_file(meta.maintenance_file, meta.maintenance)
        if fault == "garbage":
            return self._send(200, "<html>\x00\x7f not what was asked")
        if body is None:
            return self._send(404, AWS_404 if meta.cloud == "aws" else "Not Found", "text/html")
        return self._send(200, body)


def _from_file(path: str | None, otherwise: str | None) -> str | None:
    """The file's content while it exists (None, the 404, once it is gone);
    `otherwise` where no file is set."""
    if not path:
        return otherwise
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def make_server(metadata: Metadata, port: int = 0) -> ThreadingHTTPServer:
    bound = type("Handler", (Handler,), {"metadata": metadata})
    # Loopback only: the emulators never listen beyond this machine.
    server = ThreadingHTTPServer(("127.0.0.1", port), bound)
    server.daemon_threads = True
    server.metadata = metadata
    return server


@contextlib.contextmanager
def running(metadata: Metadata, port: int = 0):
    """Serve in a thread; yields the base URL."""
    server = make_server(metadata, port)
    # A short poll: shutdown() waits for it, and tests start one per case.
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def main(argv=None) -> int:
    """Run one cloud's service as a process (on a test node's loopback)."""
    parser = argparse.ArgumentParser(description="A cloud's instance metadata service on 127.0.0.1.")
    parser.add_argument("cloud", choices=["aws", "aliyun", "tencent", "huawei"])
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--notice-file", help="a file whose content, while it exists, is the spot notice")
    parser.add_argument("--maintenance-file", help="a file whose content, while it exists, is the list of "
                        "scheduled maintenance events (AWS)")
    parser.add_argument("--fault-file", help="a file whose content, while it exists, is the fault: "
                        "hang, drop, 500, garbage or empty-token")
    args = parser.parse_args(argv)
    metadata = Metadata(args.cloud)
    metadata.notice_file = args.notice_file
    metadata.maintenance_file = args.maintenance_file
    metadata.fault_file = args.fault_file
    make_server(metadata, args.port).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
