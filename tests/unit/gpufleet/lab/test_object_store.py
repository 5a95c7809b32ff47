"""The lab's object store as `gpufleet lab up` runs it: a real S3 server
process whose data survives restarts, even when many clients write at once,
and whose journal refuses to restore what it cannot restore exactly."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import urllib.request
from pathlib import Path

import boto3
import botocore.exceptions
import pytest

from gpufleet.lab import _object_store
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[4]


def _client(port):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                        aws_access_key_id="lab", aws_secret_access_key="lab-secret")


@contextlib.contextmanager
def _store(lab_dir, port, restored=None):
    """A running object store's S3 client; `restored`: how many stored
    changes its start must have restored."""
    count = _object_store.start(lab_dir, ROOT, "127.0.0.1", port=port)
    if restored is not None:
        assert count == restored, "the stored changes replayed on start"
    try:
        yield _client(port)
    finally:
        _object_store.stop(lab_dir)


def _journal_lines(lab_dir):
    return _object_store.data_file(lab_dir).read_bytes().splitlines()


def test_object_store_serves_s3_where_asked_and_stops(tmp_path):
    port = free_port()
    _object_store.start(tmp_path, ROOT, "127.0.0.1", port=port)
    try:
        # moto's S3 answers ListBuckets on its root.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
            assert b"ListAllMyBucketsResult" in answer.read()
    finally:
        assert _object_store.stop(tmp_path) is True
    assert _object_store.stop(tmp_path) is False


def test_object_store_keeps_its_objects_across_restarts_until_its_data_is_deleted(tmp_path):
    # What `lab up` does to a running lab: the server is stopped and started
    # again. restic's repositories are objects like these.
    port = free_port()
    payload = bytes(range(256)) * 400
    with _store(tmp_path, port, restored=0) as s3:
        s3.create_bucket(Bucket="backups")
        s3.put_object(Bucket="backups", Key="repo/config", Body=b"restic config")
        s3.put_object(Bucket="backups", Key="repo/data/00", Body=payload)
        s3.put_object(Bucket="backups", Key="repo/locks/1", Body=b"lock")
        s3.delete_object(Bucket="backups", Key="repo/locks/1")
    with _store(tmp_path, port, restored=5) as s3:
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="backups")["Contents"])
        assert keys == ["repo/config", "repo/data/00"], "what was deleted stays deleted"
        assert s3.get_object(Bucket="backups", Key="repo/data/00")["Body"].read() == payload
    assert _object_store.data_file(tmp_path).stat().st_mode & 0o077 == 0, "the records carry credentials"

    assert _object_store.delete_data(tmp_path) is True
    with _store(tmp_path, port, restored=0) as s3:
        assert s3.list_buckets()["Buckets"] == [], "after the data is deleted the store starts empty"


def test_many_writers_at_once_leave_a_journal_that_restores_every_object(tmp_path):
    # What broke CI: four nodes backing up at once. moto's own recorder
    # interleaved their requests in its file, and the restore answered 500.
    port = free_port()
    with _store(tmp_path, port) as s3:
        s3.create_bucket(Bucket="backups")

        def put(i):
            _client(port).put_object(Bucket="backups", Key=f"data/{i:02}", Body=bytes([i]) * 300_000)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(48)))
    for line in _journal_lines(tmp_path):
        assert isinstance(json.loads(line), dict), "every record is one whole line"
    with _store(tmp_path, port, restored=49) as s3:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="backups")["Contents"]]
        assert keys == [f"data/{i:02}" for i in range(48)]
        assert s3.get_object(Bucket="backups", Key="data/47")["Body"].read() == bytes([47]) * 300_000


def test_reads_and_refused_writes_are_not_journalled(tmp_path):
    with _store(tmp_path, free_port()) as s3:
        s3.create_bucket(Bucket="backups")
        s3.put_object(Bucket="backups", Key="config", Body=b"x")
        s3.get_object(Bucket="backups", Key="config")
        s3.list_objects_v2(Bucket="backups")
        with pytest.raises(botocore.exceptions.ClientError):
            s3.put_object(Bucket="no-such-bucket", Key="k", Body=b"x")
        assert len(_journal_lines(tmp_path)) == 2, "only the bucket and the object that were made"


def test_a_multipart_upload_is_restored_under_its_new_upload_id(tmp_path):
    # moto draws upload ids at random, so the replayed parts must be sent
    # to the id the replayed CreateMultipartUpload got.
    port = free_port()
    part = b"p" * (5 * 1024 * 1024)
    with _store(tmp_path, port) as s3:
        s3.create_bucket(Bucket="backups")
        upload = s3.create_multipart_upload(Bucket="backups", Key="data/big")["UploadId"]
        etags = [s3.upload_part(Bucket="backups", Key="data/big", UploadId=upload, PartNumber=n,
                                Body=body)["ETag"] for n, body in ((1, part), (2, b"tail"))]
        s3.complete_multipart_upload(Bucket="backups", Key="data/big", UploadId=upload, MultipartUpload={
            "Parts": [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]})
    with _store(tmp_path, port, restored=5) as s3:
        assert s3.get_object(Bucket="backups", Key="data/big")["Body"].read() == part + b"tail"


def test_a_record_cut_short_by_a_crash_is_dropped_and_the_rest_restored(tmp_path):
    port = free_port()
    with _store(tmp_path, port) as s3:
        s3.create_bucket(Bucket="backups")
    journal = _object_store.data_file(tmp_path)
    whole = journal.read_bytes()
    with journal.open("ab") as fh:
        fh.write(b'{"environ": {"REQUEST_METHOD": "PUT"')  # no newline: never answered
    with _store(tmp_path, port, restored=1) as s3:
        assert s3.list_buckets()["Buckets"][0]["Name"] == "backups"
    assert journal.read_bytes() == whole, "the unfinished record was cut off the file"


def test_a_damaged_journal_stops_the_start_and_says_how_to_recover(tmp_path):
    port = free_port()
    journal = _object_store.data_file(tmp_path)
    journal.parent.mkdir(parents=True)
    journal.write_bytes(b'{"environ": {}}{"environ": {}}\n')
    with pytest.raises(RuntimeError, match=r"line 1 is not a stored request.*gpufleet lab down"):
        _object_store.start(tmp_path, ROOT, "127.0.0.1", port=port)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)


def test_a_change_without_a_length_or_chunks_is_answered(tmp_path):
    # Debian 12's restic deletes its locks with no Content-Length: such a
    # request has no body, and waiting for one hung every backup.
    port = free_port()
    with _store(tmp_path, port) as s3:
        s3.create_bucket(Bucket="backups")
        s3.put_object(Bucket="backups", Key="locks/1", Body=b"lock")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("DELETE", "/backups/locks/1")
        conn.putheader("Authorization", "AWS4-HMAC-SHA256 Credential=lab/20261201/us-east-1/s3/aws4_request, "
                                        "SignedHeaders=host, Signature=0")
        conn.endheaders()
        assert conn.getresponse().status == 204
        conn.close()
        assert "Contents" not in s3.list_objects_v2(Bucket="backups")
    with _store(tmp_path, port, restored=3) as s3:
        assert "Contents" not in s3.list_objects_v2(Bucket="backups"), "the delete was journalled"
