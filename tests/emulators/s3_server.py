"""A real S3-compatible server for backup tests: moto's, on 127.0.0.1 only.

    python tests/emulators/s3_server.py --port N --pidfile F [--bucket B ...]
    python tests/emulators/s3_server.py --stop --pidfile F

Starts the server as a detached process (it outlives the caller, e.g. a
Molecule prepare step), waits until it answers, creates the buckets, and
records its pid; --stop ends exactly that process. Tests in Python use
``running()`` instead, which ties the server to a with-block."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import boto3

if __package__ in (None, ""):  # run as a script: the project's root holds `tests`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests.support.ports import free_port  # noqa: E402  pylint: disable=wrong-import-position


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing answers on 127.0.0.1:{port}")


def client(port: int):
    """A boto3 S3 client of the server on this port, with the test keys."""
    return boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing-secret",
    )


def create_buckets(port: int, buckets) -> None:
    s3 = client(port)
    for bucket in buckets:
        s3.create_bucket(Bucket=bucket)


@contextlib.contextmanager
def running(port: int = 0, buckets=()):
    """moto's threaded server in this process; yields its port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port or free_port())
    server.start()
    try:
        actual = server._server.server_port  # pylint: disable=protected-access
        create_buckets(actual, buckets)
        yield actual
    finally:
        server.stop()


def stop(pidfile: str) -> int:
    try:
        with open(pidfile) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    os.unlink(pidfile)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pidfile", required=True)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--stop", action="store_true")
    args = parser.parse_args(argv)
    if args.stop:
        return stop(args.pidfile)
    stop(args.pidfile)  # a server left by an interrupted run
    port = args.port or free_port()
    moto = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [moto, "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    with open(args.pidfile, "w") as handle:
        handle.write(f"{proc.pid}\n")
    wait_port(port)
    create_buckets(port, args.bucket)
    print(f"s3 server on http://127.0.0.1:{port} (pid {proc.pid})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
