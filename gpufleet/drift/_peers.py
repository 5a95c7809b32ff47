"""Peer comparison: a node whose kernel or package versions differ from the
rest of its inventory group is flagged, e.g.
"nvidia-driver 535.183 on 1 of 12 nodes, others 535.216"."""

from __future__ import annotations

from collections import Counter, defaultdict


def compare(hosts: dict[str, dict]) -> list[dict]:
    groups: dict[str, list[str]] = defaultdict(list)
    for host, meta in hosts.items():
        for group in meta.get("groups") or ["all"]:
            groups[group].append(host)
    flags: dict[tuple[str, str], dict] = {}
    # Larger groups first: a host flagged in its widest group is not repeated
    # for every smaller group it also belongs to.
    for group, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
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
