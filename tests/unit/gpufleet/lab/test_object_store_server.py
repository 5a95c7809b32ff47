"""The object store's journal and its replay, in-process against moto's
own S3 application (the server process is tested in test_object_store)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

from gpufleet.lab._object_store_server import Journal, JournalError, replay


def _put(path, body=b""):
    return {"environ": {"REQUEST_METHOD": "PUT", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "lab",
                        "SERVER_PORT": "18282", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1:18282",
                        # What routes a request to moto's S3: the service its signature names.
                        "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=lab/20261201/us-east-1/s3/aws4_request, "
                                              "SignedHeaders=host, Signature=0"},
            "body": base64.b64encode(body).decode()}


def test_a_change_moto_refuses_on_replay_stops_the_restore_naming_it():
    # The object's bucket was never made: the store cannot be what it was.
    app = DomainDispatcherApplication(create_backend_app)
    with pytest.raises(JournalError, match=r"stored request 2 \(PUT /gone/key\) answered HTTP 404"):
        replay(app, [_put("/made"), _put("/gone/key", b"x")])


def test_replayed_changes_are_served_by_the_app(tmp_path):
    app = DomainDispatcherApplication(create_backend_app)
    assert replay(app, [_put("/bucket2"), _put("/bucket2/k", b"payload")]) == 2
    environ = dict(_put("/bucket2/k")["environ"], REQUEST_METHOD="GET")
    environ.update({"wsgi.input": io.BytesIO(b""), "wsgi.url_scheme": "http", "CONTENT_LENGTH": "0"})
    status = []
    body = b"".join(app(environ, lambda line, _headers, _exc=None: status.append(line)))
    assert status[0].startswith("200") and body == b"payload"


def test_the_journal_is_private_and_one_line_per_change(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(_put("/a"))
    journal.append(_put("/a/b"))
    assert (tmp_path / "journal.jsonl").stat().st_mode & 0o077 == 0, "records carry S3 credentials"
    assert [json.loads(line)["environ"]["PATH_INFO"] for line in (tmp_path / "journal.jsonl").read_text().splitlines()] \
        == ["/a", "/a/b"]
    assert [e["environ"]["PATH_INFO"] for e in journal.load()] == ["/a", "/a/b"]


def test_a_line_that_is_not_a_record_names_its_number(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps(_put("/a")) + "\n[1, 2]\n")
    with pytest.raises(JournalError, match="line 2 is not a stored request"):
        Journal(path).load()


def test_a_change_moto_fails_on_is_named_too():
    app = DomainDispatcherApplication(create_backend_app)
    # A bucket whose configuration is not XML makes moto raise, not answer.
    with pytest.raises(JournalError, match=r"stored request 1 \(PUT /b3\) failed when replayed"):
        replay(app, [_put("/b3", b"not xml")])
