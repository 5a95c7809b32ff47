"""Small drift reports for tests."""

from __future__ import annotations

from gpufleet.drift import Report


def rec(host, resource, state, role="gpufleet.cloud.baseline", **extra):
    return {"host": host, "resource": resource, "state": state, "role": role, **extra}


def report(records, hosts=None):
    hosts = hosts or {h: {"provider": "aliyun", "region": "cn-beijing", "gpu_model": "H100", "groups": ["lab"],
                          "versions": {}} for h in sorted({r["host"] for r in records})}
    return Report(hosts=hosts, records=records, started="2026-11-30T06:00:00+00:00",
                  finished="2026-11-30T06:01:00+00:00")
