"""The drift report the CLI works on, built from the callback's JSON. The
states, the exit bitmask and the schema check are the collection's
(gpufleet/drift/_schema.py)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from pathlib import Path

from . import _doctor
from ._schema import drift as _drift

EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE = (
    _drift.EXIT_CLEAN, _drift.EXIT_DRIFT, _drift.EXIT_FAILED, _drift.EXIT_UNREACHABLE)
# --from: a pull-mode node whose report is stale, missing or unreadable
# (its record's "pull" mark): nothing of it was read, so it is never in sync.
EXIT_NOT_REPORTED = 16
STATES = _drift.STATES


@dataclasses.dataclass
class Report:
    hosts: dict[str, dict]
    records: list[dict]
    started: str = ""
    finished: str = ""
    peers: list[dict] = dataclasses.field(default_factory=list)
    # After --fix: what the converge repaired and what not, and why (_fix).
    fix: dict | None = None
    # The command that repairs what drifted, for the table's and the HTML's end.
    next_step: str | None = None
    # --from: the store read, and its reports for hosts the inventory does
    # not list (shown apart, outside the figures).
    source: str | None = None
    unlisted: list[dict] = dataclasses.field(default_factory=list)

    # -- selections --------------------------------------------------------
    def by_state(self, state: str) -> list[dict]:
        return [r for r in self.records if r["state"] == state]

    def drifted(self, include_waived: bool = False) -> list[dict]:
        return [r for r in self.by_state("drifted") if include_waived or not r.get("waiver")]

    def not_scanned(self) -> dict[str, list[dict]]:
        """Per host whose run ended at a failure, the resources it never
        reached (the callback's not_scanned records)."""
        out: dict[str, list[dict]] = defaultdict(list)
        for r in self.records:
            if r.get("not_scanned"):
                out[r["host"]].append(r)
        return dict(out)

    def not_reported(self) -> dict[str, str]:
        """--from: each host whose pull report could not be used, and why
        (stale, missing, unreadable)."""
        return {r["host"]: r["pull"] for r in self.records if r.get("pull")}

    def host_state(self, host: str) -> str:
        """One word per host: the worst state of its records (with --from,
        stale, missing or unreadable for a host whose report was not read)."""
        return self.host_states([host])[host]

    def host_states(self, hosts=None) -> dict[str, str]:
        """host_state of each host (default: the report's), from one pass
        over the records: a fleet of 10,000 hosts has a million records."""
        wanted = set(self.hosts if hosts is None else hosts)
        marks: dict[str, str] = {}
        states: dict[str, set[str]] = defaultdict(set)
        for r in self.records:
            host = r["host"]
            if host not in wanted:
                continue
            if r.get("pull"):
                marks.setdefault(host, r["pull"])
            # Waived drift is accepted: it does not make its host drifted.
            states[host].add("drifted-waived" if r["state"] == "drifted" and r.get("waiver") else r["state"])
        out = {}
        for host in wanted:
            seen = states.get(host, set())
            if host in marks:
                out[host] = marks[host]
            elif "unreachable" in seen or "failed" in seen:
                out[host] = "unreachable" if "unreachable" in seen else "failed"
            elif "drifted" in seen:
                out[host] = "drifted"
            else:
                out[host] = "in-sync" if seen else "no-resources"
        return out

    # -- figures -------------------------------------------------------------
    def exit_code(self) -> int:
        waived = {(r["host"], r["resource"]) for r in self.records if r.get("waiver")}
        return _drift.exit_code(self.records, waived) | (EXIT_NOT_REPORTED if self.not_reported() else 0)

    def in_sync_percent(self) -> float:
        if not self.hosts:
            return 0.0
        ok = sum(1 for state in self.host_states().values() if state == "in-sync")
        return 100.0 * ok / len(self.hosts)

    def coverage_percent(self) -> float:
        """Share of the resources the scan should have read whose state it
        verified: the not-scanned ones of a host whose run ended early count
        as unverified."""
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
        states = self.host_states()
        for host, meta in self.hosts.items():
            out[str(meta.get(key, "unknown"))][states[host]] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def drifted_roles(self) -> list[str]:
        """Short role names that reach the drifted resources: site.yml tags
        each role with its short name (gpufleet.cloud.baseline -> baseline).
        A resource of an internal role counts for the roles that include it
        (its record's applied_by): the internal role has no tag of its own."""
        return sorted({name.rsplit(".", 1)[-1] for r in self.drifted() if r.get("role")
                       for name in (r.get("applied_by") or [r["role"]])})

    def roles_by_host(self) -> dict[str, set[str]]:
        """The roles each host's records come from: what site.yml applied
        to it (peers are compared only with hosts given the same roles)."""
        out: dict[str, set[str]] = defaultdict(set)
        for r in self.records:
            if r.get("role"):
                out[r["host"]].add(r["role"])
        return dict(out)

    def drifted_hosts(self) -> list[str]:
        return sorted({r["host"] for r in self.drifted()})

    def faulted_hosts(self) -> list[str]:
        """Hosts whose node_health report has a tripped GPU fault (the node
        view, _doctor): not drift, so no state or exit bit of theirs."""
        return sorted(h for h, meta in self.hosts.items() if _doctor.tripped(_doctor.of(meta) or {}))

    def to_dict(self) -> dict:
        states = self.host_states()
        return {
            "version": _drift.SCHEMA_VERSION,
            "started": self.started,
            "finished": self.finished,
            "summary": {
                "hosts": len(self.hosts),
                "in_sync_percent": round(self.in_sync_percent(), 1),
                "coverage_percent": round(self.coverage_percent(), 1),
                "not_scanned": {h: len(rs) for h, rs in sorted(self.not_scanned().items())},
                **({"not_reported": dict(sorted(self.not_reported().items()))} if self.source else {}),
                "states": dict(self.counts()),
                "exit_code": self.exit_code(),
            },
            "hosts": {h: {**m, "state": states[h]} for h, m in sorted(self.hosts.items())},
            "peers": self.peers,
            **({"fix": self.fix} if self.fix is not None else {}),
            **({"source": self.source, "unlisted": self.unlisted} if self.source else {}),
            "records": self.records,
        }


def load_report(path: Path) -> Report:
    data = _drift.check_report(json.loads(Path(path).read_text(encoding="utf-8")), source=str(path))
    return Report(
        hosts=data.get("hosts", {}),
        records=data["records"],
        started=data.get("started", ""),
        finished=data.get("finished", ""),
    )
