"""Check a `molecule test` log: the check-mode pass on the converged node.

Molecule's sequence runs `check` twice: on a fresh node (must not fail) and
after converge/idempotence/verify (must report nothing to change). Molecule
only enforces the first; this enforces the second by reading the PLAY RECAP
of the last `check` action in the log.
"""

from __future__ import annotations

import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ACTION = re.compile(r"➜ (\w+): Executing$")
RECAP = re.compile(r"(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def last_check_recap(text: str) -> dict[str, dict[str, int]]:
    sections: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        m = ACTION.search(line)
        if m:
            sections.append((m.group(1), []))
        elif sections:
            sections[-1][1].append(line)
    checks = [body for name, body in sections if name == "check"]
    if len(checks) < 2:
        raise SystemExit(f"molecule_recap: expected two check actions, found {len(checks)}")
    recap = {}
    for line in checks[-1]:
        m = RECAP.search(line)
        if m:
            host, ok, changed, unreachable, failed = m.groups()
            recap[host] = {"ok": int(ok), "changed": int(changed), "unreachable": int(unreachable), "failed": int(failed)}
    if not recap:
        raise SystemExit("molecule_recap: no PLAY RECAP in the last check action")
    return recap


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        recap = last_check_recap(fh.read())
    bad = {h: r for h, r in recap.items() if r["changed"] or r["failed"] or r["unreachable"]}
    for host, r in sorted(recap.items()):
        print(f"check on converged node {host}: changed={r['changed']} failed={r['failed']}")
    if bad:
        print("molecule_recap: check mode on a converged node wants changes: " + ", ".join(sorted(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
