"""The drift report the CLI works on, built from the callback's JSON."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path

EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE = 0, 2, 4, 8
STATES = ("in-sync", "drifted", "failed", "unreachable", "could-not-verify")


@dataclasses.dataclass
class Report:
    hosts: dict[str, dict]
    records: list[dict]
    started: str = ""
    finished: str = ""
    peers: list[dict] = dataclasses.field(default_factory=list)

    # -- selections --------------------------------------------------------
    def by_state(self, state: str) -> list[dict]:
        return [r for r in self.records if r["state"] == state]

    def drifted(self, include_waived: bool = False) -> list[dict]:
        return [r for r in self.by_state("drifted") if include_waived or not r.get("waiver")]

    def host_state(self, host: str) -> str:
        """One word per host: the worst state of its records."""
        states = {r["state"] for r in self.records if r["host"] == host}
        live_drift = any(r["host"] == host for r in self.drifted())
        for state in ("unreachable", "failed"):
            if state in states:
                return state
        if live_drift:
            return "drifted"
        return "in-sync" if states else "no-resources"

    # -- figures -------------------------------------------------------------
    def exit_code(self) -> int:
        code = EXIT_CLEAN
        if self.drifted():
            code |= EXIT_DRIFT
        if self.by_state("failed"):
            code |= EXIT_FAILED
        if self.by_state("unreachable"):
            code |= EXIT_UNREACHABLE
        return code

    def in_sync_percent(self) -> float:
        if not self.hosts:
            return 0.0
        ok = sum(1 for h in self.hosts if self.host_state(h) == "in-sync")
        return 100.0 * ok / len(self.hosts)

    def coverage_percent(self) -> float:
        """Share of recorded resources whose state could be verified."""
        judged = [r for r in self.records if r["state"] != "unreachable"]
        if not judged:
            return 0.0
        verified = sum(1 for r in judged if r["state"] in ("in-sync", "drifted"))
        return 100.0 * verified / len(judged)

    def counts(self) -> Counter:
        return Counter(r["state"] for r in self.records)

    def most_drifted(self, n: int = 10) -> list[tuple[str, int]]:
        return Counter(r["resource"] for r in self.drifted(include_waived=True)).most_common(n)

    def grouped(self, key: str) -> dict[str, dict[str, int]]:
        """Hosts per value of `key` (provider, region, gpu_model), by host state."""
        out: dict[str, dict[str, int]] = defaultdict(Counter)
        for host, meta in self.hosts.items():
            out[str(meta.get(key, "unknown"))][self.host_state(host)] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def drifted_roles(self) -> list[str]:
        """Short role names of drifted resources: site.yml tags each role
        with its short name (gpufleet.cloud.baseline -> baseline)."""
        return sorted({r["role"].rsplit(".", 1)[-1] for r in self.drifted() if r.get("role")})

    def drifted_hosts(self) -> list[str]:
        return sorted({r["host"] for r in self.drifted()})

    def to_dict(self) -> dict:
        return {
            "started": self.started,
            "finished": self.finished,
            "summary": {
                "hosts": len(self.hosts),
                "in_sync_percent": round(self.in_sync_percent(), 1),
                "coverage_percent": round(self.coverage_percent(), 1),
                "states": dict(self.counts()),
                "exit_code": self.exit_code(),
            },
            "hosts": {h: {**m, "state": self.host_state(h)} for h, m in sorted(self.hosts.items())},
            "peers": self.peers,
            "records": self.records,
        }


def load_report(path: Path) -> Report:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    unknown = {r["state"] for r in data["records"]} - set(STATES)
    if unknown:
        raise ValueError(f"{path}: unknown drift states {sorted(unknown)}")
    return Report(
        hosts=data.get("hosts", {}),
        records=data["records"],
        started=data.get("started", ""),
        finished=data.get("finished", ""),
    )
