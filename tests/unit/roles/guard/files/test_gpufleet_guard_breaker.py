"""The repair ladder's fleet breaker (gpufleet_guard_breaker.py) against a
real S3 API (moto's server): places up to the limit, a node counted once,
a released place counting for its window, an abandoned one until it
expires; nodes racing for the last place; and every failure of the store
(unreachable, throttled, hanging, no bucket, an object it cannot read)
unknown, never granted."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from tests.emulators import s3_server
from tests.support.ports import REFUSED_URL

from ...conftest import load_helper
from .fakes import Clock

breaker = load_helper("guard", "gpufleet_guard_breaker.py", "gpufleet_guard_breaker")

BUCKET, KEY = "fleet-backups", "gpufleet/breaker/gpu-a100.json"
KEYS = {"access_key_id": "testing", "secret_access_key": "testing-secret"}


@pytest.fixture(scope="module")
def s3():
    with s3_server.running(buckets=[BUCKET]) as port:
        yield port


@pytest.fixture
def config(s3, request):
    # Each test its own object.
    return breaker.load_config({
        "bucket": BUCKET, "key": f"{KEY}.{request.node.name}", "node": "gpu-1", "limit": 2,
        "window_seconds": 300, "lease_seconds": 3600, "endpoint": f"http://127.0.0.1:{s3}",
        "region": "us-east-1", "credentials": dict(KEYS), "timeout": 5})


def ask(config, node, action="acquire", repair=None, clock=None):
    node_config = dict(config, node=node)
    return breaker.change(node_config, action, repair or f"xid-79--{node}", breaker.Store(node_config),
                          **({"clock": clock} if clock else {}))


def run(config, tmp_path, capsys, *args):
    path = tmp_path / "breaker.json"
    path.write_text(json.dumps(config))
    code = breaker.main([str(path), *args])
    return code, json.loads(capsys.readouterr().out)


def test_places_up_to_the_limit_then_full_naming_who_holds_them(config, tmp_path, capsys):
    assert ask(config, "gpu-1")["outcome"] == "granted"
    assert ask(config, "gpu-2")["outcome"] == "granted"
    code, report = run(dict(config, node="gpu-3"), tmp_path, capsys, "acquire", "xid-79--gpu-3")
    assert (code, report["outcome"]) == (3, "full"), report
    assert report["counting"] == ["gpu-1", "gpu-2"] and "2 of 2 place(s)" in report["detail"]
    # A node already counted is granted its second repair, and the same
    # repair asked again is still granted: neither takes a place.
    assert ask(config, "gpu-1", repair="ecc_uncorrectable--0000:3b:00.0")["outcome"] == "granted"
    assert ask(config, "gpu-1")["detail"] == "already held"
    code, report = run(config, tmp_path, capsys, "acquire", "xid-79--gpu-1")
    assert (code, report["outcome"]) == (0, "granted"), report


def test_a_released_place_counts_for_its_window_and_an_abandoned_one_until_it_expires(config):
    clock = Clock()
    assert ask(config, "gpu-1", clock=clock)["outcome"] == "granted"
    assert ask(config, "gpu-2", clock=clock)["outcome"] == "granted"
    assert ask(config, "gpu-1", "release", clock=clock)["outcome"] == "released"
    # Released, but started within the window: still counts.
    clock.now += 299
    assert ask(config, "gpu-3", clock=clock)["outcome"] == "full"
    clock.now += 2
    assert ask(config, "gpu-3", clock=clock)["outcome"] == "granted"
    # gpu-2 never gave its place back: full until its lease expires.
    assert ask(config, "gpu-4", clock=clock)["outcome"] == "full"
    clock.now += 3600
    assert ask(config, "gpu-4", clock=clock)["counting"] == ["gpu-4"]
    # Releasing what was never held (or is long gone) is fine.
    assert ask(config, "gpu-9", "release", clock=clock)["detail"] == "this repair held no place"


def test_nodes_racing_for_the_places_never_get_more_than_the_limit(config):
    outcomes = {}

    def race(node):
        try:
            outcomes[node] = ask(config, node)["outcome"]
        except breaker.Unknown:
            outcomes[node] = "unknown"

    threads = [threading.Thread(target=race, args=(f"gpu-{n}",)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    granted = sorted(node for node, outcome in outcomes.items() if outcome == "granted")
    assert len(granted) <= 2 and len(outcomes) == 10, outcomes
    # The object agrees with what was granted.
    leases, _etag = breaker.Store(config).read()
    assert sorted(lease["node"] for lease in leases) == granted
    # Once the race is over, whoever lost it reads the object whole.
    loser = next(node for node in outcomes if node not in granted)
    assert ask(config, loser)["outcome"] == ("granted" if len(granted) < 2 else "full")


def test_an_object_the_breaker_cannot_read_is_unknown_and_left_as_it_is(config, tmp_path, capsys):
    store = breaker.Store(config)
    for body in (b"{not json", b'{"leases": {"gpu-1": 1}}', b'{"leases": [{"node": "gpu-1"}]}', b"[]"):
        store.client.put_object(Bucket=BUCKET, Key=config["key"], Body=body)
        code, report = run(config, tmp_path, capsys, "acquire", "xid-79--gpu-1")
        assert (code, report["outcome"]) == (1, "unknown") and "left as it is" in report["detail"], report
        assert store.client.get_object(Bucket=BUCKET, Key=config["key"])["Body"].read() == body


class Answers503(http.server.BaseHTTPRequestHandler):
    def _slow_down(self):
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        body = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = _slow_down

    def log_message(self, *args):
        pass


class Hangs(Answers503):
    def _slow_down(self):
        threading.Event().wait(5)

    do_GET = do_PUT = _slow_down


@pytest.mark.parametrize("server", [Answers503, Hangs])
def test_a_throttling_or_hanging_store_is_unknown(config, tmp_path, capsys, server):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{httpd.server_address[1]}"
        code, report = run(dict(config, endpoint=endpoint, timeout=1), tmp_path, capsys, "acquire", "r-1")
    finally:
        httpd.shutdown()
    assert (code, report["outcome"]) == (1, "unknown"), report


@pytest.mark.parametrize("change", [{"endpoint": REFUSED_URL}, {"bucket": "no-such-bucket"}])
def test_an_unreachable_store_or_missing_bucket_is_unknown(config, tmp_path, capsys, change):
    for action in ("acquire", "release"):
        code, report = run(dict(config, **change), tmp_path, capsys, action, "r-1")
        assert (code, report["outcome"]) == (1, "unknown"), report


@pytest.mark.parametrize(("change", "message"), [
    ({"bucket": ""}, "bucket is empty"),
    ({"node": None}, "node is empty"),
    ({"limit": 0}, "limit must be a number from 1, not 0"),
    ({"window_seconds": "300"}, "window_seconds must be a number from 1, not '300'"),
    ({"lease_seconds": True}, "lease_seconds must be a number from 1, not True"),
    ({"credentials": {"access_key_id": "AKID"}}, "credentials need access_key_id and secret_access_key"),
    ({"endpoint": "not a url"}, "Invalid endpoint: not a url"),
])
def test_a_bad_configuration_is_refused_by_name(config, tmp_path, capsys, change, message):
    code, report = run(dict(config, **change), tmp_path, capsys, "acquire", "r-1")
    assert (code, report["outcome"]) == (2, "refused") and message in report["detail"], report


@pytest.mark.parametrize("args", [["acquire"], ["steal", "r-1"], ["acquire", ""], []])
def test_bad_usage_is_refused(tmp_path, capsys, args):
    code = breaker.main([str(tmp_path / "breaker.json"), *args])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["outcome"]) == (2, "refused") and "usage" in report["detail"]
