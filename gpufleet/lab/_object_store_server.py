"""The lab's object store process: moto's S3 server behind a journal, so the
objects outlive the process.

moto keeps objects in memory only. Its own request recorder is not safe to
build on: it writes each request with two unlocked writes, so the requests of
several nodes backing up at once interleave and the file no longer parses
(a replay then fails with HTTP 500); it records reads too, and failed
requests; and its replay runs while the server already serves others.

This journal instead:
- records only requests that change the store (PUT, POST, DELETE) and only
  once moto has answered them with success;
- writes each record as one line, in one write under a lock, and fsyncs it
  before the client gets its answer, so an answered write is on disk;
- is replayed into moto in-process before the server listens, so nothing
  reaches the store while it is restored;
- maps a multipart upload's id, which moto draws at random, from the one
  recorded to the one the replay got, so the upload's parts replay too.

A line cut short by a crash (the last one, without its newline) was never
answered; it is dropped on start. Any other damage stops the start with the
line number, and nothing is served from a store that was only partly
restored.

Run as `python -m gpufleet.lab._object_store_server --host H --port P
--journal FILE`; _object_store starts and stops it."""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

MUTATING = frozenset({"PUT", "POST", "DELETE"})
# moto's request handler keeps the original spelling of headers with an
# underscore under this (non-string) environ key.
_PRESERVED_NAMES = "moto.preserved_header_names"
_UPLOAD_ID = re.compile(r"<UploadId>([^<]+)</UploadId>")
_UPLOADS_QUERY = re.compile(r"(^|&)uploads(=[^&]*)?(&|$)")
_UPLOAD_ID_QUERY = re.compile(r"(^|&)uploadId=([^&]*)")


class JournalError(RuntimeError):
    """The journal cannot be replayed exactly."""


class Journal:
    """An append-only file of the store's successful changes, one JSON
    object per line."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None

    def load(self) -> list[dict]:
        """The stored changes, oldest first. A last line without its newline
        (a write cut short) is cut off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            with self.path.open("r+b") as fh:
                fh.truncate(complete)
            print(f"object store: dropped an unfinished last record ({len(data) - complete} bytes) "
                  f"from {self.path}", flush=True)
        entries = []
        for number, line in enumerate(data[:complete].splitlines(), 1):
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise JournalError(f"{self.path}: line {number} is not a stored request ({exc})") from exc
            if not isinstance(entry, dict) or not isinstance(entry.get("environ"), dict):
                raise JournalError(f"{self.path}: line {number} is not a stored request")
            entries.append(entry)
        return entries

    def append(self, entry: dict) -> None:
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                # The records carry the lab's S3 credentials in their headers.
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)


def _record(environ: dict, body: bytes) -> dict:
    """What replays the request: its CGI variables and headers, and the body."""
    # JournalledApp has already set CONTENT_LENGTH to the whole body and
    # dropped chunking.
    kept = {k: v for k, v in environ.items() if k.isupper() and isinstance(v, str)}
    entry = {"environ": kept, "body": base64.b64encode(body).decode("ascii")}
    if isinstance(environ.get(_PRESERVED_NAMES), dict):
        entry["preserved_names"] = environ[_PRESERVED_NAMES]
    return entry


def _read_body(environ: dict) -> bytes:
    stream = environ["wsgi.input"]
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return stream.read()  # werkzeug's dechunked input ends with the body
    length = environ.get("CONTENT_LENGTH") or ""
    # A request with neither a length nor chunks has no body (RFC 9112,
    # 6.3): reading on would wait for the client, which waits for us. Old
    # restic (Debian 12's) deletes its locks that way.
    return stream.read(int(length)) if length.isdigit() else b""


def _creates_upload(environ: dict) -> bool:
    """A CreateMultipartUpload: POST on a key with the `uploads` query."""
    return environ["REQUEST_METHOD"] == "POST" and _UPLOADS_QUERY.search(environ.get("QUERY_STRING", "")) is not None


def _upload_id(chunks: list[bytes]) -> str | None:
    """The UploadId of a CreateMultipartUpload's answer."""
    found = _UPLOAD_ID.search(b"".join(chunks).decode("utf-8", "replace"))
    return found.group(1) if found else None


def _call(app, environ: dict, start_response=None) -> tuple[int, list[bytes]]:
    """Run `app` on `environ`; its status code and its whole body, which
    is collected before anything is sent. `start_response`, when given, is
    the server's, and gets the answer's status and headers."""
    status: list[int] = []

    def capture(line, headers, exc_info=None):
        status.append(int(line.split()[0]))
        if start_response is not None:
            return start_response(line, headers, exc_info)
        return lambda _data: None  # moto returns its body; it never writes

    result = app(environ, capture)
    try:
        chunks = list(result)
    finally:
        if hasattr(result, "close"):
            result.close()
    return (status[-1] if status else 500), chunks


class JournalledApp:
    """WSGI middleware: every successful change reaches the journal before
    its answer leaves the server."""

    def __init__(self, app, journal: Journal):
        self.app = app
        self.journal = journal

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") not in MUTATING:
            return self.app(environ, start_response)
        body = _read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["wsgi.input_terminated"] = False
        code, chunks = _call(self.app, environ, start_response)
        if 200 <= code < 300:
            entry = _record(environ, body)
            upload_id = _upload_id(chunks) if _creates_upload(environ) else None
            if upload_id:
                entry["upload_id"] = upload_id
            # Raises if the disk refuses it: the client then gets an error,
            # never a success that a restart would lose.
            self.journal.append(entry)
        return chunks


def replay(app, entries: list[dict]) -> int:
    """Apply the stored changes to a fresh `app`, in order; how many were
    applied. Raises JournalError on the first one moto refuses."""
    upload_ids: dict[str, str] = {}
    for number, entry in enumerate(entries, 1):
        environ = dict(entry["environ"])
        query = environ.get("QUERY_STRING", "")
        found = _UPLOAD_ID_QUERY.search(query)
        if found and found.group(2) in upload_ids:
            old, new = found.group(2), upload_ids[found.group(2)]
            for key in ("QUERY_STRING", "REQUEST_URI", "RAW_URI"):
                if key in environ:
                    environ[key] = environ[key].replace(f"uploadId={old}", f"uploadId={new}")
        body = base64.b64decode(entry.get("body", ""))
        environ.update({
            "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr, "wsgi.multithread": False, "wsgi.multiprocess": False,
            "wsgi.run_once": False, "CONTENT_LENGTH": str(len(body)),
        })
        if "preserved_names" in entry:
            environ[_PRESERVED_NAMES] = entry["preserved_names"]
        try:
            code, chunks = _call(app, environ)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # moto failing on a change it once accepted: stop, say which.
            raise JournalError(f"stored request {number} ({environ.get('REQUEST_METHOD')} "
                               f"{environ.get('PATH_INFO')}) failed when replayed: {exc!r}") from exc
        if not 200 <= code < 300:
            raise JournalError(f"stored request {number} ({environ.get('REQUEST_METHOD')} "
                               f"{environ.get('PATH_INFO')}) answered HTTP {code} when replayed")
        if "upload_id" in entry:
            new_id = _upload_id(chunks)
            if not new_id:
                raise JournalError(f"stored request {number} (a multipart upload) got no upload id when replayed")
            upload_ids[entry["upload_id"]] = new_id
    return len(entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpufleet.lab._object_store_server")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--journal", type=Path, required=True)
    args = parser.parse_args(argv)

    # moto reads these at import; its own recorder stays off.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    os.environ.pop("MOTO_ENABLE_RECORDING", None)
    from moto.moto_server.werkzeug_app import (  # pylint: disable=import-outside-toplevel
        DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
    from werkzeug.serving import run_simple  # pylint: disable=import-outside-toplevel

    moto_app = DomainDispatcherApplication(create_backend_app)
    journal = Journal(args.journal)
    try:
        count = replay(moto_app, journal.load())
    except JournalError as exc:
        print(f"object store: cannot restore its data: {exc}. `gpufleet lab down` deletes the stored "
              "data and starts again empty", file=sys.stderr, flush=True)
        return 3
    print(f"object store: restored {count} stored changes from {args.journal}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple(args.host, args.port, JournalledApp(moto_app, journal), threaded=True,
               request_handler=MotoRequestHandler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
