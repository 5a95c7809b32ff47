"""`gpufleet guard status`: each node's guard (spot notice, maintenance,
idle time, spend against its cap, last event, repairs) read from the
node, as a table or JSON."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import sys
import time
from pathlib import Path

from .. import _ansible, _exit
from ._status import NO_GUARD, REPORTING, UNREACHABLE, UNREADABLE, NodeGuard, from_metrics, with_repairs

TASK = "Read the guard's metrics"
REPAIRS_TASK = "Read the guard's repairs"
EXIT_OK, EXIT_USAGE, EXIT_NOT_REPORTING, EXIT_UNREACHABLE = _exit.OK, _exit.USAGE, _exit.FAILED, _exit.UNREACHABLE

EPILOG = """\
exit status: a bitmask
  0   every node's guard reported
  1   the command could not run as asked
  4   a node has no guard running, or its metrics do not read
  8   a node could not be reached

examples:
  gpufleet guard status -i inventories/aliyun
  gpufleet guard status -i inventories/aliyun --limit gpu_h100 --format json | jq '.nodes[].spend'
"""


def add_parser(sub) -> None:
    guard = sub.add_parser("guard", help="the guard daemon on each node (docs/guard.md)",
                           description="The guard daemon (gpufleet.cloud.guard) across the fleet.")
    actions = guard.add_subparsers(dest="action", required=True)
    status = actions.add_parser("status", help="each node's triggers, spend, cap, idle time and repairs",
                                description="Read each node's guard metrics and show its spot notice, scheduled "
                                            "maintenance, idle time, spend against its cap, last event and GPU "
                                            "fault repairs. Unknown is shown as unknown.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    status.add_argument("-i", "--inventory", required=True, help="inventory path, e.g. inventories/aliyun")
    status.add_argument("--limit", help="only these hosts or groups (Ansible pattern)")
    status.add_argument("--format", choices=["table", "json"], default="table")
    status.add_argument("--quiet", action="store_true", help="no progress on stderr")


def collect(root: Path, inventory: str, limit: str | None, quiet: bool) -> tuple[list[NodeGuard], int, str]:
    nodes: dict[str, NodeGuard] = {}

    def on_event(event: dict) -> None:
        data = event.get("event_data") or {}
        host, res = data.get("host"), data.get("res") or {}
        if event.get("event") == "runner_on_unreachable" and host:
            nodes[host] = NodeGuard(host, UNREACHABLE, str(res.get("msg", ""))[:300])
        elif event.get("event") in ("runner_on_ok", "runner_on_failed") and data.get("task") == TASK and host:
            if "content" not in res:
                nodes[host] = NodeGuard(host, NO_GUARD, str(res.get("msg", "no metrics file"))[:300])
                return
            try:
                text = base64.b64decode(res["content"]).decode("utf-8")
            except (ValueError, UnicodeDecodeError) as error:
                nodes[host] = NodeGuard(host, UNREADABLE, f"the metrics file is not text: {error}")
                return
            nodes[host] = from_metrics(host, text)
        elif (event.get("event") == "runner_on_ok" and data.get("task") == REPAIRS_TASK and "content" in res
              and host in nodes):
            try:
                nodes[host] = with_repairs(nodes[host], base64.b64decode(res["content"]).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                pass  # the history stays unknown; the metrics still say each repair's state

    rc, status = _ansible.run_playbook(root, "playbooks/guard_status.yml", inventory, {}, "", limit, None, quiet,
                                       on_event=on_event)
    return sorted(nodes.values(), key=lambda n: n.host), rc, status


def exit_code(nodes: list[NodeGuard]) -> int:
    code = EXIT_OK
    for node in nodes:
        if node.state == UNREACHABLE:
            code |= EXIT_UNREACHABLE
        elif node.state != REPORTING:
            code |= EXIT_NOT_REPORTING
    return code


def _unknown(value, shown):
    return "unknown" if value is None else shown(value)


def _seconds(value: float) -> str:
    value = int(value)
    return f"{value // 3600}h{value % 3600 // 60:02d}m" if value >= 3600 else f"{value // 60}m{value % 60:02d}s"


def _spend(node: NodeGuard) -> str:
    """The spend against its cap, in words where a number is missing: "no
    price known, no cap set" rather than "unknown / no cap unknown"."""
    if node.priced is False:
        spent = "no price known"
    else:
        spent = "spend unknown" if node.spend is None else f"{node.spend:.2f}"
    if node.capped is False:
        return f"{spent}, no cap set"
    cap = ", cap unknown" if node.spend_cap is None else f" of cap {node.spend_cap:.2f}"
    # The state says what the numbers do not: ok, alarm or cap.
    state = f" ({node.budget})" if node.budget and node.budget != "unknown" else ""
    return f"{spent}{cap}{state}"


def row(node: NodeGuard, now: float) -> list[str]:
    if node.state != REPORTING:
        return [node.host, node.state, node.detail or "", "", "", "", "", ""]
    spot = _unknown(node.spot, str)
    if node.spot == "notice":
        spot += _unknown(node.spot_deadline, lambda d: f" in {_seconds(max(d - now, 0))}")
    idle = f"{_unknown(node.idle_seconds, _seconds)} of {_unknown(node.idle_window_seconds, _seconds)}"
    if node.idle_seconds is None and node.idle_window_seconds is None:
        idle = "off"
    elif node.idle_armed is False:
        idle += " (not armed)"
    spend = _spend(node)
    event = "none"
    if node.last_event:
        landed = {True: "landed", False: "NOT landed", None: "landed unknown"}[node.checkpoint_landed]
        action = node.last_action if node.final_action_ok is not False else f"{node.last_action} FAILED"
        event = f"{node.last_event} -> {action}, checkpoint {landed}"
    polled = _unknown(node.last_poll_at, lambda t: f"{_seconds(max(now - t, 0))} ago")
    return [node.host, f"{node.state}, polled {polled}", f"{spot} ({node.cloud or 'no cloud'})", _maintenance(node, now),
            idle, spend, event, _repair(node)]


def _repair(node: NodeGuard) -> str:
    """Each repair the guard shows, open ones first: its fault, the rung it
    is at, its state, and why where it waits or holds (the repairs file)."""
    if node.repairs is None:
        return "off"
    why = {(r.get("fault"), r.get("state")): r.get("why") for r in node.repair_history or ()}
    cells = []
    for fault, _cls, rung, state in sorted(node.repairs, key=lambda r: r[3] in ("cleared", "exhausted")):
        # Why, for the repairs that wait for something or hold.
        reason = why.get((fault, state)) if state in ("held", "waiting") else None
        cells.append(f"{fault} at {rung} ({state}: {reason})" if reason else f"{fault} at {rung} ({state})")
    return "; ".join(cells) or "none"


def _maintenance(node: NodeGuard, now: float) -> str:
    """The scheduled maintenance: its first window, or the reading's state
    (a daemon from before maintenance was read: unknown)."""
    if node.maintenance == "scheduled" and node.maintenance_start is not None:
        start = node.maintenance_start - now
        return f"{node.maintenance_code} in {_seconds(start)}" if start > 0 else f"{node.maintenance_code} now"
    return _unknown(node.maintenance, lambda state: state.replace("_", " "))


def table(nodes: list[NodeGuard], now: float) -> str:
    rows = ([["host", "guard", "spot", "maintenance", "idle", "spend / cap", "last event", "repair"]]
            + [row(n, now) for n in nodes])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)


def run(root: Path, args) -> int:
    nodes, rc, status = collect(root, args.inventory, args.limit, args.quiet)
    if not nodes:
        print(f"gpufleet guard status: no node answered (ansible-playbook rc {rc}, {status}); "
              "check the inventory with ansible-inventory -i " + args.inventory + " --graph", file=sys.stderr)
        return EXIT_NOT_REPORTING
    code = exit_code(nodes)
    if args.format == "json":
        print(json.dumps({"exit_code": code, "nodes": [dataclasses.asdict(n) for n in nodes]}, indent=2))
    else:
        print(table(nodes, time.time()))
    return code
