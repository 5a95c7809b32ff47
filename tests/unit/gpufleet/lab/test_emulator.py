"""The lab's Alibaba Cloud emulator (its seed, a real start and stop) and
its object store (a real S3 server whose data survives a restart)."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml

from gpufleet.lab import _emulator, _nodes, _object_store
from tests.emulators.s3_server import free_port

ROOT = Path(__file__).resolve().parents[4]


def test_seed_lists_each_node_as_a_running_gpu_instance_at_its_loopback_address():
    data = _emulator.seed(_nodes.plan(2))
    assert data["regions"] == ["cn-hangzhou"]
    first = data["instances"][0]
    assert first["private_ip"] == "127.0.0.11" and first["name"] == "lab-node-1"
    assert first["tags"] == {"gpufleet-lab": "true", "ssh_port": "2201"}
    assert first["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert len({i["instance_id"] for i in data["instances"]}) == 2


def test_seed_tags_the_gpu_stack_nodes_for_the_inventory():
    data = _emulator.seed(_nodes.plan(3, gpu_stack=1))
    assert [i["tags"].get("gpufleet-lab-gpu-stack") for i in data["instances"]] == [None, None, "true"]


def test_start_serves_the_seed_and_stop_ends_the_process(tmp_path):
    port = free_port()
    _emulator.start(tmp_path, ROOT, _nodes.plan(1), port=port)
    try:
        assert yaml.safe_load((tmp_path / "aliyun-seed.yml").read_text())["instances"][0]["name"] == "lab-node-1"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        assert _emulator.stop(tmp_path) is True
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert _emulator.stop(tmp_path) is False, "stopping twice is harmless"


def test_start_refuses_a_port_that_is_taken(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(RuntimeError, match="is taken by another process"):
            _emulator.start(tmp_path, ROOT, _nodes.plan(1), port=busy.getsockname()[1])


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

    def client():
        return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                            aws_access_key_id="lab", aws_secret_access_key="lab-secret")

    payload = bytes(range(256)) * 400
    assert _object_store.start(tmp_path, ROOT, "127.0.0.1", port=port) == 0
    try:
        s3 = client()
        s3.create_bucket(Bucket="backups")
        s3.put_object(Bucket="backups", Key="repo/config", Body=b"restic config")
        s3.put_object(Bucket="backups", Key="repo/data/00", Body=payload)
        s3.put_object(Bucket="backups", Key="repo/locks/1", Body=b"lock")
        s3.delete_object(Bucket="backups", Key="repo/locks/1")
    finally:
        _object_store.stop(tmp_path)
    assert _object_store.start(tmp_path, ROOT, "127.0.0.1", port=port) > 0, "the stored requests were replayed"
    try:
        s3 = client()
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="backups")["Contents"])
        assert keys == ["repo/config", "repo/data/00"], "what was deleted stays deleted"
        assert s3.get_object(Bucket="backups", Key="repo/data/00")["Body"].read() == payload
    finally:
        _object_store.stop(tmp_path)
    assert _object_store.data_file(tmp_path).stat().st_mode & 0o077 == 0, "the requests carry credentials"

    assert _object_store.delete_data(tmp_path) is True
    assert _object_store.start(tmp_path, ROOT, "127.0.0.1", port=port) == 0
    try:
        assert client().list_buckets()["Buckets"] == [], "after the data is deleted the store starts empty"
    finally:
        _object_store.stop(tmp_path)
