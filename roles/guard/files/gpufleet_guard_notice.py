# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Spot interruption notices, read from each cloud's instance metadata
service by the guard daemon (gpufleet_guard.py) every few seconds.

Standard library only: the daemon runs from systemd on the node, without
Ansible. A reading is one of:

- ``notice``: the cloud will reclaim the instance; ``deadline`` is when.
- ``warning``: AWS's rebalance recommendation, a risk but no deadline.
- ``clear``: the service answered that nothing is scheduled (HTTP 404).
- ``unknown``: anything else. A network error, a timeout, HTTP 500, a
  body that does not parse, a field missing, an action this code does not
  know: never a trigger, and never "clear" either.
- ``unsupported``: the cloud documents no in-guest notice (Huawei Cloud).

The paths, headers and formats are the clouds' documented ones
(docs/guard.md lists the sources):

- AWS: IMDSv2 token (PUT /latest/api/token), then
  /latest/meta-data/spot/instance-action, JSON {"action", "time"} in
  RFC 3339 UTC; /latest/meta-data/events/recommendations/rebalance,
  JSON {"noticeTime"}. A 401 means the token expired: get a new one, once.
- Alibaba Cloud: token with the X-aliyun-ecs-metadata-token headers, then
  /latest/meta-data/instance/spot/termination-time, an RFC 3339 UTC time.
- Tencent Cloud: /latest/meta-data/spot/termination-time, no token, a
  time like "2018-08-18 12:05:33" in UTC+8 with no zone written.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import http.client
import json
import time
import urllib.error
import urllib.request

NOTICE, WARNING, CLEAR, UNKNOWN, UNSUPPORTED = "notice", "warning", "clear", "unknown", "unsupported"

# What each cloud's metadata service answers on (overridable for tests).
ENDPOINTS = {
    "aws": "http://169.254.169.254",
    "aliyun": "http://100.100.100.200",
    "tencent": "http://metadata.tencentyun.com",
    "huawei": "http://169.254.169.254",
}
# Tokens are asked for this long and renewed this long before they end
# (AWS's node termination handler renews 15 s early).
TOKEN_TTL = 21600
TOKEN_RENEW_BEFORE = 60
AWS_ACTIONS = ("terminate", "stop", "hibernate")
TENCENT_ZONE = datetime.timezone(datetime.timedelta(hours=8))


@dataclasses.dataclass(frozen=True)
class Reading:
    state: str
    kind: str = ""  # terminate, stop, hibernate, rebalance, reclaim
    deadline: float | None = None  # seconds since the epoch
    detail: str = ""  # the body read, or why the reading is unknown
    event_id: str = ""  # the same notice read again has the same id

    @property
    def triggers(self) -> bool:
        return self.state == NOTICE


def _event(cloud: str, kind: str, body: str, deadline: float | None) -> Reading:
    # The id is the notice's own content: a notice read on every poll is one
    # event, and a new notice (another time or action) is another.
    digest = hashlib.sha256(f"{cloud}\0{kind}\0{body.strip()}".encode()).hexdigest()[:16]
    state = WARNING if kind == "rebalance" else NOTICE
    return Reading(state, kind, deadline, body.strip(), f"{cloud}-{kind}-{digest}")


def _unknown(why: str) -> Reading:
    return Reading(UNKNOWN, detail=why)


class _Answer(Exception):
    """An HTTP status other than 200, which the caller interprets."""

    def __init__(self, status: int, body: str):
        super().__init__(status)
        self.status = status
        self.body = body


def _http(method: str, url: str, headers: dict[str, str], timeout: float) -> str:
    request = urllib.request.Request(url, method=method, headers=headers, data=b"" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - a fixed http URL
            return response.read(65536).decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        raise _Answer(error.code, error.read(4096).decode("utf-8", "replace")) from None


def _rfc3339(text: str) -> float:
    """A time as AWS and Alibaba write it, 2015-01-05T18:02:00Z; an explicit
    offset is read too, but a time without a zone is ambiguous: refused."""
    text = text.strip()
    parsed = datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    if parsed.tzinfo is None:
        raise ValueError(f"a time without a zone: {text!r}")
    return parsed.timestamp()


def _tencent_time(text: str) -> float:
    """Tencent's '2018-08-18 12:05:33', which is UTC+8 without saying so."""
    parsed = datetime.datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S")
    return parsed.replace(tzinfo=TENCENT_ZONE).timestamp()


def guarded(read, unknown):
    """read(), with each way the metadata service can fail given to
    unknown(why) instead of raised (the maintenance reader's too)."""
    try:
        return read()
    except _Answer as answer:
        return unknown(f"HTTP {answer.status} from the metadata service: {answer.body[:200]!r}")
    except (OSError, urllib.error.URLError) as error:  # refused, unreachable, timed out
        return unknown(f"the metadata service did not answer: {getattr(error, 'reason', error)}")
    except http.client.HTTPException as error:  # a broken HTTP answer
        return unknown(f"the metadata service's answer is not HTTP: {error!r}")
    except ValueError as error:  # a body that does not parse
        return unknown(f"the metadata service's answer does not parse: {error}")


class Reader:
    """Reads one cloud's notice. ``read()`` never raises: every failure is
    an ``unknown`` reading that says why."""

    cloud = ""

    def __init__(self, endpoint: str | None = None, timeout: float = 2.0, clock=time.time):
        self.endpoint = (endpoint or ENDPOINTS[self.cloud]).rstrip("/")
        self.timeout = timeout
        self.clock = clock

    def read(self) -> Reading:
        return guarded(self._read, _unknown)

    def _read(self) -> Reading:
        raise NotImplementedError

    def _termination_time(self, path: str, parse) -> Reading:
        """A notice that is only the reclaim time (Alibaba, Tencent)."""
        body = self._get(path, {})
        if body is None:
            return Reading(CLEAR)
        return _event(self.cloud, "reclaim", body, parse(body))

    def _get(self, path: str, headers: dict[str, str]) -> str | None:
        """The body of a 200, None for a 404 (nothing scheduled)."""
        try:
            return _http("GET", self.endpoint + path, headers, self.timeout)
        except _Answer as answer:
            if answer.status == 404:
                return None
            raise


class _TokenReader(Reader):
    """A reader whose metadata service hands out session tokens (AWS's
    IMDSv2, Alibaba's hardened mode), sent with every read."""

    token_path = "/latest/api/token"
    ttl_header = ""
    token_header = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._token: str | None = None
        self._token_until = 0.0

    def _headers(self, renew: bool = False) -> dict[str, str]:
        if renew or self._token is None or self.clock() >= self._token_until:
            token = _http("PUT", self.endpoint + self.token_path, {self.ttl_header: str(TOKEN_TTL)}, self.timeout)
            if not token.strip():
                raise ValueError("the token service answered an empty token")
            self._token = token.strip()
            self._token_until = self.clock() + TOKEN_TTL - TOKEN_RENEW_BEFORE
        return {self.token_header: self._token}

    def _get(self, path: str, headers: dict[str, str] | None = None) -> str | None:
        try:
            return super()._get(path, self._headers())
        except _Answer as answer:
            if answer.status != 401:
                raise
        # 401: the token expired or was revoked; one new token, one retry.
        self._token = None
        return super()._get(path, self._headers(renew=True))


class AwsReader(_TokenReader):
    cloud = "aws"
    ttl_header = "X-aws-ec2-metadata-token-ttl-seconds"
    token_header = "X-aws-ec2-metadata-token"

    def _read(self) -> Reading:
        body = self._get("/latest/meta-data/spot/instance-action")
        if body is not None:
            try:
                action = json.loads(body)
            except json.JSONDecodeError as error:
                raise ValueError(f"instance-action is not JSON ({error}): {body[:200]!r}") from None
            if not isinstance(action, dict) or not isinstance(action.get("action"), str) or "time" not in action:
                raise ValueError(f"instance-action lacks its action or time: {body[:200]!r}")
            if action["action"] not in AWS_ACTIONS:
                raise ValueError(f"instance-action names an action this guard does not know: {action['action']!r}")
            return _event(self.cloud, action["action"], body, _rfc3339(str(action["time"])))
        rebalance = self._get("/latest/meta-data/events/recommendations/rebalance")
        if rebalance is None:
            return Reading(CLEAR)
        try:
            notice_time = json.loads(rebalance)["noticeTime"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"the rebalance recommendation lacks its noticeTime: {rebalance[:200]!r}") from None
        _rfc3339(str(notice_time))  # it must parse; a rebalance has no deadline
        return _event(self.cloud, "rebalance", rebalance, None)


class AliyunReader(_TokenReader):
    cloud = "aliyun"
    ttl_header = "X-aliyun-ecs-metadata-token-ttl-seconds"
    token_header = "X-aliyun-ecs-metadata-token"

    def _read(self) -> Reading:
        return self._termination_time("/latest/meta-data/instance/spot/termination-time", _rfc3339)


class TencentReader(Reader):
    cloud = "tencent"

    def _read(self) -> Reading:
        return self._termination_time("/latest/meta-data/spot/termination-time", _tencent_time)


class HuaweiReader(Reader):
    cloud = "huawei"

    def read(self) -> Reading:
        # Huawei Cloud's instance metadata has no spot item; its reclaim
        # notice goes to SMN or the console, not to the guest (docs/guard.md).
        # The job still gets the operating system's shutdown signal.
        return Reading(UNSUPPORTED, detail="Huawei Cloud documents no spot interruption notice inside the instance")


READERS = {reader.cloud: reader for reader in (AwsReader, AliyunReader, TencentReader, HuaweiReader)}


def reader_for(cloud: str, endpoint: str | None = None, timeout: float = 2.0, clock=time.time) -> Reader:
    if cloud not in READERS:
        raise ValueError(f"no spot notice reader for the cloud {cloud!r}; known: {', '.join(sorted(READERS))}")
    return READERS[cloud](endpoint, timeout, clock)
