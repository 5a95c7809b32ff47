# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The fleet's circuit breaker for the repair ladder: no more than
``limit`` nodes of a group may start a repair within ``window_seconds``.

No server of ours: the breaker is one JSON object in the object store the
backups use, read and changed only by conditional writes (S3's If-Match,
and If-None-Match for the first), so of two nodes that ask at once for
the last place one gets it and the other reads the object again.

    /opt/gpufleet/guard-sdk/bin/python3 gpufleet_guard_breaker.py /etc/gpufleet/guard/breaker.json acquire|release REPAIR_ID

The configuration is JSON: ``bucket``, ``key`` (the object's name),
``node`` (this node's name), ``limit``, ``window_seconds``,
``lease_seconds``, and optionally ``endpoint`` (empty: AWS S3's own),
``region``, ``timeout`` (seconds per call) and ``credentials``
(``access_key_id``, ``secret_access_key``, ``security_token``; empty: the
SDK's chain, an instance role on a node).

The object holds the leases: {"leases": [{"node", "repair", "started",
"expires", "released"}]}. A lease counts while it is held and not expired,
and for ``window_seconds`` from its start even once released: a node that
repaired and cleared quickly still counts for the window. A node counts
once, whatever number of repairs it holds; a node that already counts is
granted another repair. A lease that is never released (a node gone)
stops counting when it expires.

Exit status, which the ladder reads:
- 0: granted (acquire), or given back (release);
- 3: full: ``limit`` other nodes count; it prints who;
- 1: unknown: the store did not answer, throttled, refused, or holds an
  object this cannot read (left as it is, never overwritten), or the
  conditional write lost to other nodes every time. The ladder takes no
  action on it;
- 2: a bad configuration or usage.

It prints one JSON line: the outcome and the nodes that count.
"""

from __future__ import annotations

import json
import sys
import time

GRANTED, UNKNOWN, BAD, FULL = 0, 1, 2, 3
ACTIONS = ("acquire", "release")
# Conditional writes lost to another node before giving up (unknown).
TRIES = 5


class Unknown(Exception):
    """The breaker's state cannot be read or written."""


def load_config(raw: dict) -> dict:
    config = dict(raw)
    for key in ("bucket", "key", "node"):
        if not isinstance(config.get(key), str) or not config[key]:
            raise ValueError(f"{key} is empty: the breaker needs the object store's {key}")
    for key in ("limit", "window_seconds", "lease_seconds"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
            raise ValueError(f"{key} must be a number from 1, not {value!r}")
    keys = config.get("credentials") or None
    if keys is not None and not (keys.get("access_key_id") and keys.get("secret_access_key")):
        raise ValueError("credentials need access_key_id and secret_access_key")
    config["credentials"] = keys
    config["timeout"] = float(config.get("timeout") or 20)
    return config


def counting(lease: dict, now: float, window: float) -> bool:
    held = lease.get("released") is None and lease["expires"] > now
    return held or lease["started"] + window > now


def parse(body: bytes) -> list[dict]:
    try:
        leases = json.loads(body)["leases"]
        if not isinstance(leases, list) or not all(isinstance(lease, dict) for lease in leases):
            raise TypeError("leases is not a list of objects")
        for lease in leases:
            for field in ("node", "repair", "started", "expires"):
                if field not in lease:
                    raise KeyError(field)
            lease["started"], lease["expires"] = float(lease["started"]), float(lease["expires"])
    except (ValueError, KeyError, TypeError) as error:
        raise Unknown(f"the breaker's object cannot be read ({type(error).__name__}: {error}); "
                      "it is left as it is") from error
    return leases


class Store:
    """The one object, through boto3; every failure is Unknown."""

    def __init__(self, config: dict):
        # pylint: disable=import-outside-toplevel
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError
        self.errors = (BotoCoreError, ClientError)
        self.client_error = ClientError
        keys = config["credentials"] or {}
        self.client = boto3.client(
            "s3", region_name=config.get("region") or None, endpoint_url=config.get("endpoint") or None,
            aws_access_key_id=keys.get("access_key_id"), aws_secret_access_key=keys.get("secret_access_key"),
            aws_session_token=keys.get("security_token"),
            config=Config(connect_timeout=config["timeout"], read_timeout=config["timeout"],
                          retries={"mode": "standard", "total_max_attempts": 2}))
        self.bucket, self.key = config["bucket"], config["key"]

    def _code(self, error) -> str:
        return error.response.get("Error", {}).get("Code", "") if isinstance(error, self.client_error) else ""

    def read(self) -> tuple[list[dict], str | None]:
        """The leases and the object's ETag (None: no object yet)."""
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
            return parse(answer["Body"].read()), answer["ETag"]
        except self.errors as error:
            if self._code(error) in ("NoSuchKey", "404"):
                return [], None
            raise Unknown(f"reading s3://{self.bucket}/{self.key}: {error}") from error

    def write(self, leases: list[dict], etag: str | None) -> bool:
        """Whether the write went through; False where another node wrote first."""
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key, ContentType="application/json",
                                   Body=json.dumps({"leases": leases}, indent=1).encode(), **condition)
        except self.errors as error:
            if self._code(error) in ("PreconditionFailed", "ConditionalRequestConflict", "412", "409"):
                return False
            raise Unknown(f"writing s3://{self.bucket}/{self.key}: {error}") from error
        return True


def change(config: dict, action: str, repair: str, store, clock=time.time) -> dict:
    """Acquire or release once, through conditional writes; the outcome."""
    node, window = config["node"], config["window_seconds"]
    for _try in range(TRIES):
        leases, etag = store.read()
        now = clock()
        kept = [lease for lease in leases if counting(lease, now, window)]
        others = sorted({lease["node"] for lease in kept if lease["node"] != node})
        mine = [lease for lease in kept if lease["node"] == node and lease.get("released") is None]
        if action == "release":
            found = [lease for lease in mine if lease["repair"] == repair]
            if not found:
                return {"outcome": "released", "detail": "this repair held no place", "counting": others}
            for lease in found:
                lease["released"] = now
        elif any(lease["repair"] == repair for lease in mine):
            return {"outcome": "granted", "detail": "already held", "counting": others}
        elif not mine and len(others) >= config["limit"]:
            return {"outcome": "full", "counting": others,
                    "detail": f"{len(others)} of {config['limit']} place(s) taken within "
                              f"{window:g} s: {', '.join(others)}"}
        else:
            kept.append({"node": node, "repair": repair, "started": now,
                         "expires": now + config["lease_seconds"], "released": None})
        if store.write(kept, etag):
            outcome = "released" if action == "release" else "granted"
            return {"outcome": outcome, "counting": others + ([] if action == "release" else [node])}
    raise Unknown(f"other nodes changed the breaker {TRIES} times while this one tried")


def main(argv=None, store_class=Store) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[1] not in ACTIONS or not argv[2]:
        print(json.dumps({"outcome": "refused",
                          "detail": "usage: gpufleet_guard_breaker.py CONFIG.json acquire|release REPAIR_ID"}))
        return BAD
    path, action, repair = argv
    report = {"action": action, "repair": repair}
    try:
        with open(path, encoding="utf-8") as handle:
            config = load_config(json.load(handle))
        report.update(change(config, action, repair, store_class(config)))
        code = FULL if report["outcome"] == "full" else GRANTED
    except ImportError as error:
        report.update(outcome="unknown", detail=f"the SDK is not installed: {error}")
        code = UNKNOWN
    except (OSError, ValueError, AttributeError) as error:
        # The file, its settings, or the SDK's refusal of one (an endpoint
        # that is no URL).
        report.update(outcome="refused", detail=f"the configuration {path}: {error}")
        code = BAD
    except Unknown as error:
        report.update(outcome="unknown", detail=str(error))
        code = UNKNOWN
    print(json.dumps(report, sort_keys=True))
    return code


if __name__ == "__main__":
    sys.exit(main())
