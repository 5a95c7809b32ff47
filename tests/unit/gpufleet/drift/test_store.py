"""`gpufleet drift --from s3://...`: the pull-mode nodes' reports, merged
against the inventory. The store is moto's S3 server on 127.0.0.1, reached
through the real SDK and --endpoint; the inventory is a static one, listed
by the real ansible-inventory."""

from __future__ import annotations

import copy
import datetime
import json
import re
import uuid

import pytest

from gpufleet import cli
from gpufleet.drift import _store
from tests.emulators import s3_server

from .helpers import Page, rec

PREFIX = "gpufleet/drift"
NOW = datetime.datetime.now(datetime.timezone.utc)


def node_report(host, records, finished=NOW, provider="aws"):
    """What a node's check-mode pull run uploads (the drift callback's schema)."""
    return {"version": 1, "started": (finished - datetime.timedelta(minutes=2)).isoformat(),
            "finished": finished.isoformat(), "check_mode": True,
            "hosts": {host: {"provider": provider, "region": "us-east-1", "gpu_model": "A10G", "groups": [],
                             "versions": {"kernel": "6.1.0"}}},
            "records": [dict(r, host=host) for r in records], "exit_code": 0}


CLEAN = [rec("x", "baseline : Install", "in-sync"), rec("x", "security : sshd", "in-sync", "gpufleet.cloud.security")]
DRIFTED = [rec("x", "baseline : Install", "in-sync"),
           rec("x", "baseline : Configure chrony", "drifted", diff=[{"before": "a", "after": "b"}])]

INVENTORY = """\
all:
  children:
    gpu:
      hosts:
        fresh-1: {gpufleet_provider: aws, gpufleet_region: us-east-1, gpufleet_gpu: {model: A10G, count: 1}}
        drifted-2: {gpufleet_provider: aws, gpufleet_region: us-east-1}
        stale-3: {gpufleet_provider: aliyun, gpufleet_region: cn-hangzhou}
        missing-4: {gpufleet_provider: tencent, gpufleet_region: ap-shanghai}
        broken-5: {gpufleet_provider: huawei, gpufleet_region: cn-north-4}
"""


@pytest.fixture
def store(monkeypatch):
    """moto's S3 server with a bucket of the test's own (moto's servers in
    one process share their buckets); the SDK's credentials from the
    environment, as on a controller. Yields (port, client, bucket)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = f"gpufleet-{uuid.uuid4().hex[:12]}"
    with s3_server.running(buckets=[bucket]) as port:
        yield port, s3_server.client(port), bucket


def put(store, node, body):
    _port, s3, bucket = store
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/{node}.json",
                  Body=body if isinstance(body, (str, bytes)) else json.dumps(body))


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "galaxy.yml").write_text("namespace: gpufleet\n")
    (tmp_path / "inv.yml").write_text(INVENTORY)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def drift_from(store, *more):
    port, _s3, bucket = store
    return cli.main(["drift", "-i", "inv.yml", "--from", f"s3://{bucket}/{PREFIX}", "--endpoint",
                     f"http://127.0.0.1:{port}", "--region", "us-east-1", "--output-dir", "out", *more])


def test_the_fleet_is_merged_and_what_was_not_read_is_never_in_sync(project, store, capsys):
    _port, s3, bucket = store
    put(store, "fresh-1", node_report("fresh-1", CLEAN))
    put(store, "drifted-2", node_report("drifted-2", DRIFTED))
    # Five hours before now, not before NOW (the module's import): on a busy
    # machine minutes pass between the two.
    stale_finished = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=5)
    put(store, "stale-3", node_report("stale-3", CLEAN, finished=stale_finished))
    put(store, "broken-5", '{"records": [')
    put(store, "gone-9", node_report("gone-9", DRIFTED))  # the inventory no longer lists it
    # Not a node's report: deeper keys and other files under the prefix.
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/archive/fresh-1.json", Body=b"{}")
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/README.txt", Body=b"hello")

    rc = drift_from(store)
    stale_age = datetime.datetime.now(datetime.timezone.utc) - stale_finished
    out = capsys.readouterr().out
    # Drift (2) and nodes not reported (16).
    assert rc == 2 | 16, out
    report = json.loads((project / "out" / "report.json").read_text())
    states = {h: meta["state"] for h, meta in report["hosts"].items()}
    assert states == {"fresh-1": "in-sync", "drifted-2": "drifted", "stale-3": "stale", "missing-4": "missing",
                      "broken-5": "unreadable"}
    assert report["summary"]["not_reported"] == {"broken-5": "unreadable", "missing-4": "missing", "stale-3": "stale"}
    assert report["summary"]["in_sync_percent"] == 20.0
    # Only what was read is counted as read: the three unread nodes lower the coverage.
    assert report["summary"]["coverage_percent"] == round(100 * 4 / 7, 1)
    assert report["summary"]["exit_code"] == 18
    drift = [r for r in report["records"] if r["state"] == "drifted"]
    assert [(r["host"], r["resource"]) for r in drift] == [("drifted-2", "baseline : Configure chrony")]
    assert drift[0]["diff"] == [{"before": "a", "after": "b"}]
    why = {r["host"]: r["message"] for r in report["records"] if r.get("pull")}
    assert f"no report at s3://{bucket}/{PREFIX}/missing-4.json" in why["missing-4"]
    assert "older than --max-age 90 minutes" in why["stale-3"], why["stale-3"]
    # The age when the merge read it: five hours, and at most the minutes
    # that passed since the report was made.
    hours, minutes = map(int, re.search(r"(\d+) h (\d+) min ago", why["stale-3"]).groups())
    assert 5 * 60 <= hours * 60 + minutes <= stale_age.total_seconds() // 60, (why["stale-3"], stale_age)
    assert f"s3://{bucket}/{PREFIX}/broken-5.json" in why["broken-5"]
    # The stale node's old records are not counted: nothing of it is in sync.
    assert not [r for r in report["records"] if r["host"] == "stale-3" and not r.get("pull")]
    # Shown apart: the report of a node the inventory does not list.
    assert [u["host"] for u in report["unlisted"]] == ["gone-9"]
    assert "gone-9" not in report["hosts"]
    # Each node's metadata: the inventory's, with what its own report says.
    assert report["hosts"]["missing-4"]["provider"] == "tencent"
    assert report["hosts"]["fresh-1"]["gpu_model"] == "A10G" and report["hosts"]["fresh-1"]["groups"] == ["gpu"]
    # The table names each unread node and why, and the node outside.
    for line in ("stale-3              stale", "missing-4            missing", "broken-5             unreadable",
                 "gone-9               not in inventory"):
        assert line in out, out
    assert "stale 1  missing 1  unreadable 1  not in the inventory 1" in out
    # JUnit: an unread node is an error, not a skip.
    junit = (project / "out" / "report.xml").read_text()
    assert 'name="missing-4" tests="1" failures="0" errors="1"' in junit
    # HTML: the same, for a person.
    page = (project / "out" / "report.html").read_text()
    assert "Not reported: broken-5 (unreadable), missing-4 (missing), stale-3 (stale)" in page
    assert "gone-9: report finished" in page
    assert Page(page).rows


def test_a_larger_max_age_keeps_an_older_report(project, store):
    for host in ("fresh-1", "drifted-2", "missing-4", "broken-5"):
        put(store, host, node_report(host, CLEAN))
    put(store, "stale-3", node_report("stale-3", CLEAN, finished=NOW - datetime.timedelta(hours=5)))
    assert drift_from(store, "--max-age", "360") == 0
    assert drift_from(store, "--max-age", "240") == 16


def test_an_empty_store_is_every_node_missing_never_a_clean_fleet(project, store):
    assert drift_from(store) == 16
    report = json.loads((project / "out" / "report.json").read_text())
    assert set(report["summary"]["not_reported"].values()) == {"missing"}
    assert report["summary"]["in_sync_percent"] == 0.0 and report["summary"]["coverage_percent"] == 0.0


def test_a_store_that_cannot_be_listed_fails_and_names_it(project, store, capsys):
    port = store[0]
    rc = cli.main(["drift", "-i", "inv.yml", "--from", "s3://no-such-bucket/x", "--endpoint",
                   f"http://127.0.0.1:{port}", "--output-dir", "out"])
    assert rc == 4
    assert "--from s3://no-such-bucket/x: cannot list the reports: NoSuchBucket" in capsys.readouterr().err
    assert not (project / "out" / "report.json").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--from", "http://bucket/x"], "expected s3://BUCKET/PREFIX"),
    (["--from", "s3://Bad_Bucket/x"], "'Bad_Bucket' is not a bucket name"),
    (["--from", "s3://fleet/x", "--fix", "--yes"], "--fix does not apply with --from"),
    (["--from", "s3://fleet/x", "--limit", "gpu"], "--limit does not apply with --from"),
    (["--from", "s3://fleet/x", "--tags", "baseline"], "--tags does not apply with --from"),
    (["--from", "s3://fleet/x", "--max-age", "0"], "--max-age 0: give the minutes"),
    (["--from", "s3://fleet/x", "--endpoint", "oss-cn-hangzhou.aliyuncs.com"], "expected the URL of an S3 API"),
    (["--endpoint", "http://127.0.0.1:9000"], "--endpoint only apply with --from"),
    (["--region", "us-east-1"], "--region only apply with --from"),
    (["--max-age", "30"], "--max-age only apply with --from"),
])
def test_bad_from_options_name_the_option_before_anything_is_read(project, capsys, argv, message):
    assert cli.main(["drift", "-i", "inv.yml", *argv]) == 1
    assert message in capsys.readouterr().err


def test_merge_uses_only_a_reports_own_host_and_keeps_the_newest_times():
    reports = {"a": node_report("a", CLEAN), "b": node_report("b", DRIFTED)}
    # A report that carries another node's records too: only its own count.
    intruder = copy.deepcopy(reports["b"])
    intruder["records"].append(dict(rec("a", "baseline : Install", "drifted"), host="a"))
    fetched = {"a": _store.Fetched("p/a.json", text=json.dumps(reports["a"])),
               "b": _store.Fetched("p/b.json", text=json.dumps(intruder))}
    inventory = {h: {"provider": "aws", "region": "r", "gpu_model": "none", "groups": [], "versions": {}}
                 for h in ("a", "b")}
    merged = _store.merge(fetched, inventory, "s3://fleet/p", datetime.timedelta(minutes=90), now=NOW)
    assert merged.host_state("a") == "in-sync" and merged.host_state("b") == "drifted"
    assert merged.finished == NOW.isoformat()
    # Each text is let go once parsed.
    assert fetched["a"].text is None and fetched["b"].text is None
    # A node whose object could not be fetched is unreadable, with the reason.
    fetched = {"a": _store.Fetched("p/a.json", error="ReadTimeoutError: timed out"),
               "b": _store.Fetched("p/b.json", text=json.dumps(intruder))}
    merged = _store.merge(fetched, inventory, "s3://fleet/p", datetime.timedelta(minutes=90), now=NOW)
    assert merged.not_reported() == {"a": "unreadable"}
    assert "timed out" in merged.records[0]["message"]


def test_another_nodes_report_under_a_nodes_key_is_never_that_nodes():
    # A node whose pull_node_name is not its inventory name, or a report
    # from before the runner named its host (the run's localhost).
    for host in ("gpu-node-8", "localhost"):
        fetched = {"gpu-node-7": _store.Fetched("p/gpu-node-7.json", text=json.dumps(node_report(host, CLEAN)))}
        merged = _store.merge(fetched, {"gpu-node-7": {}}, "s3://fleet/p", datetime.timedelta(minutes=90), now=NOW)
        assert merged.not_reported() == {"gpu-node-7": "unreadable"}
        assert f"a report of {host}, not of gpu-node-7" in merged.records[0]["message"]


def test_the_inventory_says_the_cloud_where_it_knows_it_and_the_report_the_rest():
    fetched = {"a": _store.Fetched("p/a.json", text=json.dumps(node_report("a", CLEAN, provider="aws")))}
    inventory = {"a": {"provider": "unknown", "region": "eu-west-1", "gpu_model": "none", "groups": ["gpu"],
                       "versions": {}}}
    merged = _store.merge(fetched, inventory, "s3://fleet/p", datetime.timedelta(minutes=90), now=NOW)
    meta = merged.hosts["a"]
    assert meta["provider"] == "aws" and meta["region"] == "eu-west-1" and meta["gpu_model"] == "A10G"
    assert meta["groups"] == ["gpu"] and meta["versions"] == {"kernel": "6.1.0"}


def test_a_report_from_another_schema_is_unreadable_not_merged():
    other = dict(node_report("a", CLEAN), version=2)
    fetched = {"a": _store.Fetched("p/a.json", text=json.dumps(other))}
    merged = _store.merge(fetched, {"a": {}}, "s3://fleet/p", datetime.timedelta(minutes=90), now=NOW)
    assert merged.not_reported() == {"a": "unreadable"}
    assert "schema version 2" in merged.records[0]["message"]


def test_listing_pages_are_all_read(store):
    """More reports than one page of the listing holds."""
    _port, s3, bucket = store
    for n in range(25):
        s3.put_object(Bucket=bucket, Key=f"{PREFIX}/n{n}.json", Body=b"{}")
    fetched = _store.fetch(s3, bucket, PREFIX, workers=8, page_size=10)
    assert len(fetched) == 25 and fetched["n24"].text == "{}"
