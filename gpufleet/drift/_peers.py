"""Peer comparison: a node whose kernel or package versions differ from its
peers is flagged, e.g. "nvidia-driver 535.183 on 1 of 12 nodes, others
535.216". Peers share an inventory group, an OS release and the roles
site.yml applied to them: a Debian 12 node against a Debian 13 one, or a
GPU node's packages against a node without GPUs, differ by design."""

from __future__ import annotations

from collections import Counter, defaultdict


def compare(hosts: dict[str, dict], roles: dict[str, set[str]] | None = None) -> list[dict]:
    """`hosts`: the report's host metadata (groups, os, versions); `roles`:
    the roles recorded on each host (a host missing there is its own kind)."""
    roles = roles or {}
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = defaultdict(list)
    for host, meta in hosts.items():
        kind = (str(meta.get("os", "unknown")), tuple(sorted(roles.get(host, ()))))
        for group in meta.get("groups") or ["all"]:
            groups[(group, *kind)].append(host)
    flags: dict[tuple[str, str], dict] = {}
    # Larger groups first: a host flagged in its widest group is not repeated
    # for every smaller group it also belongs to.
    for (group, *_kind), members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(members) < 2:
            continue
        keys = sorted({k for h in members for k in hosts[h].get("versions", {})})
        for key in keys:
            values = {h: hosts[h].get("versions", {}).get(key, "absent") for h in members}
            counts = Counter(values.values())
            if len(counts) < 2:
                continue
            majority, majority_n = counts.most_common(1)[0]
            if majority_n == counts.most_common(2)[1][1]:
                majority = None  # no clear majority: flag every value
            for host, value in sorted(values.items()):
                if value == majority or (host, key) in flags:
                    continue
                others = sorted({v for h, v in values.items() if v != value})
                flags[(host, key)] = {
                    "host": host,
                    "group": group,
                    "item": key,
                    "value": value,
                    "message": f"{key} {value} on {counts[value]} of {len(members)} nodes, "
                               f"others {', '.join(others)}",
                }
    return sorted(flags.values(), key=lambda f: (f["host"], f["item"]))
