"""`gpufleet drift --from s3://bucket/prefix`: the fleet's drift from the
reports its pull-mode nodes upload (gpufleet.cloud.pull), merged into one
report, with no scan from here.

Each node's newest report is one object, `<prefix>/<node>.json`, in the
schema the drift callback writes. The inventory says which nodes there
should be: a listed node without a report is *missing*, one whose report
is older than --max-age is *stale*, one whose report cannot be read is
*unreadable*. Each of those gets one could-not-verify record that names
why, never an in-sync one, and the exit code's bit 16. A report for a node
the inventory does not list is shown apart, outside the fleet's figures.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import json
import re
import sys
from urllib.parse import urlsplit

from ._model import Report
from ._schema import drift as _drift

# A pull-mode node whose report is not there to be read: the host's state,
# and the mark on its one record.
PULL_STATES = ("stale", "missing", "unreadable")
RESOURCE = "pull report"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class StoreError(Exception):
    """The store cannot be read as asked: the message names the option."""


@dataclasses.dataclass
class Fetched:
    """One node's object: its text, or why it could not be read."""

    key: str
    text: str | None = None
    error: str | None = None


def parse_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of s3://bucket[/prefix]."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise StoreError(f"--from {url}: expected s3://BUCKET/PREFIX, for example s3://gpufleet-backup/gpufleet/drift "
                         "(OSS, COS and OBS too, through --endpoint)")
    if not _BUCKET.match(parts.netloc):
        raise StoreError(f"--from {url}: {parts.netloc!r} is not a bucket name (3 to 63 lower-case letters, digits, "
                         "dots and hyphens)")
    return parts.netloc, parts.path.strip("/")


def client(endpoint: str | None, region: str | None, **credentials):
    """An S3 client of the store, with the AWS SDK's credential chain
    unless `credentials` (boto3's aws_access_key_id and the rest) say."""
    import boto3  # pylint: disable=import-outside-toplevel
    from botocore.config import Config  # pylint: disable=import-outside-toplevel

    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 5, "mode": "standard"},
                    max_pool_connections=32)
    return boto3.client("s3", endpoint_url=endpoint or None, region_name=region or None, config=config,
                        **credentials)


def _node_of(key: str, prefix: str) -> str | None:
    rest = key[len(prefix) + 1:] if prefix else key
    if "/" in rest or not rest.endswith(".json") or len(rest) == len(".json"):
        return None
    return rest[: -len(".json")]


def fetch(client, bucket: str, prefix: str, workers: int = 32, page_size: int | None = None) -> dict[str, Fetched]:
    """Every node's report under the prefix, by node name: listed page by
    page, then read side by side. A listing that fails fails the whole
    read (a partial listing would call present nodes missing); an object
    that fails is that node's error."""
    keys = {}
    paginator = client.get_paginator("list_objects_v2")
    pages = {"PageSize": page_size} if page_size else {}
    for page in paginator.paginate(Bucket=bucket, Prefix=(prefix + "/") if prefix else "", PaginationConfig=pages):
        for item in page.get("Contents", ()):
            node = _node_of(item["Key"], prefix)
            if node is not None:
                keys[node] = item["Key"]

    def get(key: str) -> Fetched:
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            return Fetched(key, text=body.decode("utf-8"))
        except Exception as exc:  # pylint: disable=broad-except  # one node's failure is that node's
            return Fetched(key, error=f"{type(exc).__name__}: {exc}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(keys, pool.map(get, keys.values())))


def _finished(data: dict) -> datetime.datetime | None:
    try:
        when = datetime.datetime.fromisoformat(str(data.get("finished")))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _unverified(host: str, why: str, message: str) -> dict:
    return {"host": host, "resource": RESOURCE, "role": None, "action": "gpufleet.cloud.pull",
            "state": _drift.NOT_VERIFIED, "pull": why, "message": message}


# Record fields whose values repeat across a fleet's reports (the same
# resources on every node): one string each, not one per node (10,000
# nodes: about 1.05 million records).
_SHARED = ("host", "resource", "role", "action", "state")


def _shared(records: list[dict]) -> list[dict]:
    for record in records:
        for key in _SHARED:
            value = record.get(key)
            if isinstance(value, str):
                record[key] = sys.intern(value)
    return records


def merge(fetched: dict[str, Fetched], inventory: dict[str, dict], url: str, max_age: datetime.timedelta,
          now: datetime.datetime | None = None) -> Report:
    """One fleet report from the nodes' reports. `inventory` is each listed
    host's metadata (provider, region, gpu_model, groups). Each fetched text
    is let go once parsed (Fetched.text becomes None): the fleet's reports
    are held once, as records."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    hosts: dict[str, dict] = {}
    records: list[dict] = []
    unlisted = []
    times: list[tuple[str, str]] = []
    for node in sorted(set(inventory) | set(fetched)):
        got = fetched.get(node)
        where = f"{url.rstrip('/')}/{node}.json"
        data, problem = None, None
        if got is not None and got.error is None:
            text, got.text = got.text, None
            try:
                loaded = json.loads(text)
            except ValueError as exc:
                problem = f"{where}: not JSON ({exc})"
            else:
                try:
                    data = _drift.check_report(loaded, source=where)
                except ValueError as exc:
                    problem = str(exc)
                else:
                    # Another node's report under this node's key (a
                    # pull_node_name that is not the inventory's name)
                    # must never pass for this node's.
                    named = sorted(data["hosts"])
                    if named != [node]:
                        problem = (f"{where}: a report of {', '.join(named) or 'no host'}, not of {node}: the "
                                   f"node's pull_node_name must be its inventory name, {node}")
                        data = None
        elif got is not None:
            problem = f"{where}: {got.error}"
        if node not in inventory:
            if got is not None:
                unlisted.append({"host": node, "key": got.key, "finished": (data or {}).get("finished"),
                                 "exit_code": (data or {}).get("exit_code"), "error": problem})
            continue
        meta = dict(inventory[node])
        when = _finished(data) if data is not None else None
        if got is None:
            records.append(_unverified(node, "missing", f"no report at {where}: has this node's pull timer run "
                                                        "in check mode with a report bucket?"))
        elif data is None:
            records.append(_unverified(node, "unreadable", problem))
        elif when is None or now - when > max_age:
            age = "no finish time" if when is None else f"finished {when.isoformat()}, {_ago(now - when)} ago"
            records.append(_unverified(node, "stale", f"newest report {age}, older than --max-age "
                                                      f"{int(max_age.total_seconds() // 60)} minutes"))
        else:
            records.extend(_shared([r for r in data["records"] if r.get("host") == node]))
            # The node's own run knows its versions and OS; the inventory
            # knows its groups (a pull run sees none) and its cloud, where it
            # says them.
            own = data["hosts"][node]
            known = {k: v for k, v in meta.items() if v not in ("unknown", "none")}
            meta = {**own, **known, "versions": own.get("versions") or {}}
            times.append((str(data.get("started") or data["finished"]), str(data["finished"])))
        hosts[node] = meta
    # The fleet's report spans its nodes' fresh reports.
    report = Report(hosts=hosts, records=records, started=min((t[0] for t in times), default=""),
                    finished=max((t[1] for t in times), default=""))
    report.unlisted = unlisted
    report.source = url
    return report


def _ago(delta: datetime.timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def inventory_meta(listing: dict) -> dict[str, dict]:
    """Each host of `ansible-inventory --list` output with the metadata a
    report keeps (the drift callback's host_meta): provider, region, GPU
    model and groups."""
    hostvars = (listing.get("_meta") or {}).get("hostvars") or {}
    groups: dict[str, list[str]] = {}
    for group, body in listing.items():
        if group == "_meta" or not isinstance(body, dict):
            continue
        for host in body.get("hosts") or ():
            groups.setdefault(host, []).append(group)
    return {host: _drift.host_meta(hostvars.get(host) or {}, [g for g in groups.get(host, []) if g != "ungrouped"])
            for host in sorted(set(hostvars) | set(groups))}
