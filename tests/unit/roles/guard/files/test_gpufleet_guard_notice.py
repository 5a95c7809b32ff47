"""The guard's spot notice readers against the loopback metadata services
(tests/emulators/instance_metadata.py): each cloud's notice, its "nothing
scheduled", and the faults that must read as unknown, never as a notice
and never as clear."""

from __future__ import annotations

import datetime
import json
import socket

import pytest

from tests.emulators.instance_metadata import Metadata, running

from ...conftest import load_helper

notice = load_helper("guard", "gpufleet_guard_notice.py", "gpufleet_guard_notice")

CLOUDS = ("aws", "aliyun", "tencent")
# The same moment as each cloud writes it: Tencent's is UTC+8, without a zone.
WHEN = datetime.datetime(2026, 12, 3, 4, 5, 33, tzinfo=datetime.timezone.utc).timestamp()
BODIES = {
    "aws": json.dumps({"action": "terminate", "time": "2026-12-03T04:05:33Z"}),
    "aliyun": "2026-12-03T04:05:33Z",
    "tencent": "2026-12-03 12:05:33",
}
# Bodies that parse as text but are not what the cloud documents.
MALFORMED = {
    "aws": ["not json", "[]", json.dumps({"action": "terminate"}), json.dumps({"time": "2026-12-03T04:05:33Z"}),
            json.dumps({"action": "reboot", "time": "2026-12-03T04:05:33Z"}),
            json.dumps({"action": "stop", "time": "tomorrow"}), json.dumps({"action": 7, "time": "x"})],
    "aliyun": ["", "soon", "2026-12-03 04:05:33", "2026-12-03T04:05:33"],
    "tencent": ["", "soon", "2026-12-03T12:05:33Z", "2026-12-03 12:05", "1764734733"],
}


def read(meta: Metadata, timeout: float = 2.0, **kwargs):
    with running(meta) as url:
        reader = notice.reader_for(meta.cloud, url, timeout=timeout, **kwargs)
        return reader.read()


@pytest.mark.parametrize("cloud", CLOUDS)
def test_nothing_scheduled_is_clear(cloud):
    reading = read(Metadata(cloud))
    assert reading.state == notice.CLEAR and not reading.triggers


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_notice_triggers_with_its_deadline_in_utc(cloud):
    meta = Metadata(cloud)
    meta.notice = BODIES[cloud]
    reading = read(meta)
    assert reading.state == notice.NOTICE and reading.triggers
    assert reading.deadline == WHEN
    assert reading.kind == ("terminate" if cloud == "aws" else "reclaim")


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_repeated_notice_is_the_same_event_and_a_new_one_is_not(cloud):
    meta = Metadata(cloud)
    meta.notice = BODIES[cloud]
    with running(meta) as url:
        reader = notice.reader_for(cloud, url)
        first, again = reader.read(), reader.read()
        meta.notice = BODIES[cloud].replace("04:05:33", "04:07:33").replace("12:05:33", "12:07:33")
        later = reader.read()
    assert first.event_id and first.event_id == again.event_id
    assert later.state == notice.NOTICE and later.event_id != first.event_id
    assert later.deadline == WHEN + 120


@pytest.mark.parametrize("fault", ["500", "garbage", "drop"])
@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_failing_service_is_unknown_never_a_notice(cloud, fault):
    meta = Metadata(cloud)
    meta.notice = BODIES[cloud]
    meta.fault = fault
    reading = read(meta)
    assert reading.state == notice.UNKNOWN and not reading.triggers, reading
    assert reading.detail


@pytest.mark.parametrize("cloud", CLOUDS)
def test_a_service_that_hangs_past_the_timeout_is_unknown(cloud):
    meta = Metadata(cloud, hang_seconds=1.5)
    meta.notice = BODIES[cloud]
    meta.fault = "hang"
    reading = read(meta, timeout=0.3)
    assert reading.state == notice.UNKNOWN, reading
    assert "did not answer" in reading.detail


@pytest.mark.parametrize("cloud", CLOUDS)
def test_no_service_at_all_is_unknown(cloud):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reading = notice.reader_for(cloud, f"http://127.0.0.1:{port}", timeout=0.5).read()
    assert reading.state == notice.UNKNOWN and "did not answer" in reading.detail


@pytest.mark.parametrize(("cloud", "body"), [(c, b) for c, bodies in MALFORMED.items() for b in bodies])
def test_a_malformed_or_incomplete_notice_is_unknown(cloud, body):
    meta = Metadata(cloud)
    meta.notice = body
    reading = read(meta)
    assert reading.state == notice.UNKNOWN and not reading.triggers, (body, reading)
    assert "parse" in reading.detail


def test_aws_stop_and_hibernate_are_notices_too():
    for action in ("stop", "hibernate"):
        meta = Metadata("aws")
        meta.notice = json.dumps({"action": action, "time": "2026-12-03T04:05:33Z"})
        reading = read(meta)
        assert (reading.state, reading.kind, reading.deadline) == (notice.NOTICE, action, WHEN)


def test_aws_rebalance_is_a_warning_without_deadline_and_the_notice_wins():
    meta = Metadata("aws")
    meta.rebalance = json.dumps({"noticeTime": "2026-12-03T03:50:00Z"})
    reading = read(meta)
    assert (reading.state, reading.kind, reading.deadline, reading.triggers) == (notice.WARNING, "rebalance", None, False)
    meta.notice = BODIES["aws"]
    assert read(meta).state == notice.NOTICE
    meta.notice, meta.rebalance = None, json.dumps({"notice": "x"})
    assert read(meta).state == notice.UNKNOWN


@pytest.mark.parametrize("cloud", ["aws", "aliyun"])
def test_an_expired_token_is_renewed_once_and_the_read_succeeds(cloud):
    meta = Metadata(cloud, require_token=True)
    meta.notice = BODIES[cloud]
    with running(meta) as url:
        reader = notice.reader_for(cloud, url)
        assert reader.read().state == notice.NOTICE
        meta.expire_tokens()
        assert reader.read().state == notice.NOTICE
    puts = [call for call in meta.calls if call[0] == "PUT"]
    statuses = [status for method, _path, status in meta.calls if method == "GET"]
    assert len(puts) == 2 and 401 in statuses, meta.calls


def test_a_token_is_reused_until_it_is_due():
    meta = Metadata("aws")
    with running(meta) as url:
        reader = notice.reader_for("aws", url)
        for _read in range(3):
            assert reader.read().state == notice.CLEAR
    assert [c for c in meta.calls if c[0] == "PUT"] == [("PUT", "/latest/api/token", 200)]


def test_an_empty_token_is_unknown():
    meta = Metadata("aws")
    meta.fault = "empty-token"
    assert read(meta).state == notice.UNKNOWN


def test_huawei_has_no_notice_and_says_so():
    reading = notice.reader_for("huawei").read()
    assert reading.state == notice.UNSUPPORTED and not reading.triggers
    assert "no spot interruption notice" in reading.detail


def test_an_unknown_cloud_is_refused_by_name():
    with pytest.raises(ValueError, match="'gcp'.*known: aliyun, aws, huawei, tencent"):
        notice.reader_for("gcp")


def test_a_notice_file_is_the_notice_while_it_exists(tmp_path):
    # How a test node's emulator process gets its notice (the guard scenario).
    meta = Metadata("tencent")
    meta.notice_file = str(tmp_path / "notice")
    with running(meta) as url:
        reader = notice.reader_for("tencent", url)
        assert reader.read().state == notice.CLEAR
        (tmp_path / "notice").write_text(BODIES["tencent"])
        assert reader.read().deadline == WHEN
