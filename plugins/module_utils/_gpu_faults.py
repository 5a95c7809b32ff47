# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""GPU faults, classified by NVIDIA's XID catalogue and counted against a
threshold within a window, per class and, where the user says so, per code.

Private to this collection. node_health's check imports it on the node
(_common's node_library step installs it as gpufleet_gpu_faults.py), and
the role's preflight validates the policy with the same code
(gpufleet.cloud.fault_policy_problems). Standard library only.

Classes are the resolution buckets of NVIDIA's XID catalogue for Ampere and
newer GPUs ("Analyzing Xid Errors with the Xid Catalog",
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the
immediate action column), as NVIDIA's NVSentinel carries them in its XID
mapping (NVIDIA/NVSentinel, xiderrorsmapping.csv). Where NVSentinel says
UNEXPECTED_ERR_REPORT_ISSUE, the catalogue says CONTACT_SUPPORT, and so do
we. The faults the XID catalogue has no code for are classified by gpufleet
from NVIDIA's other documents, and documented as such (docs/node-doctor.md):
fewer GPUs than the inventory promises, uncorrectable ECC errors over the
role's limit, a pending or failed row remap, and NVSwitch (SXid) lines by
the severity the driver writes in each.

A code that is not in the table, and XID 154 (its action is another XID's),
is "unknown": reported, never tripped, so it never leads to an action.
"""

from __future__ import annotations

import datetime
import re

UNKNOWN = "unknown"

# The catalogue's buckets, and the first step of the repair ladder each asks
# for (none: report only). RESTART_BM is a bare-metal restart: on a cloud VM
# the nearest step is the VM's reboot.
CLASS_STEPS = {
    "IGNORE": "none",
    "RESTART_APP": "restart_app",
    "CHECK_UVM": "restart_app",
    "RESET_GPU": "reset_gpu",
    "WORKFLOW_XID_48": "reset_gpu",
    "WORKFLOW_NVLINK_ERR": "reset_gpu",
    "WORKFLOW_NVLINK5_ERR": "reset_gpu",
    "RESTART_VM": "reboot",
    "RESTART_BM": "reboot",
    "CHECK_MECHANICALS": "replace",
    "CONTACT_SUPPORT": "replace",
    # Driver or firmware: a rollout decision, not a repair.
    "UPDATE_SWFW": "none",
    # Preemptive cleanup after another XID, which carries the action.
    "WORKFLOW_XID_45": "none",
}
CLASSES = tuple(CLASS_STEPS)
# The classes the guard's repair ladder can be turned on for: those with a
# step to take.
REPAIRABLE = tuple(name for name, step in CLASS_STEPS.items() if step != "none")

# Default threshold (occurrences) and window (minutes) of each class. An
# application's own error trips only when it repeats; a fault of the GPU
# or the node trips at once.
DEFAULT_POLICY = {name: {"threshold": 1, "window_minutes": 60} for name in CLASSES}
DEFAULT_POLICY["RESTART_APP"] = {"threshold": 3, "window_minutes": 60}


def _codes(*spans) -> tuple[int, ...]:
    out: list[int] = []
    for span in spans:
        out += list(range(span[0], span[1] + 1)) if isinstance(span, tuple) else [span]
    return tuple(out)


_BY_CLASS = {
    "RESTART_APP": _codes(8, 11, 13, 25, 31, 32, 39, 40, 41, 60, (68, 72), (75, 77), 80, (82, 86), 88, 89, 94,
                          (96, 105), (126, 135), 139),
    "IGNORE": _codes(14, 37, 38, 43, 44, 63, 66, 67, 92, 93, 106, 107, 121, 137, 141, 152, 153, 157, 161),
    "WORKFLOW_XID_45": (45,),
    "RESET_GPU": _codes(46, 62, 64, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158, 162),
    "WORKFLOW_XID_48": (48,),
    "CHECK_MECHANICALS": (54,),
    "WORKFLOW_NVLINK_ERR": (74,),
    "UPDATE_SWFW": (78,),
    "RESTART_BM": (79, 160),
    "WORKFLOW_NVLINK5_ERR": _codes((144, 150)),
    "RESTART_VM": (151,),
    "CHECK_UVM": (159,),
}
# The catalogue's last code; every code up to it that no class above names
# is CONTACT_SUPPORT there, except 154, which defers to another XID.
CATALOGUE_LAST = 162
XID_CATALOGUE = {code: name for name, codes in _BY_CLASS.items() for code in codes}
for _code in range(1, CATALOGUE_LAST + 1):
    if _code not in XID_CATALOGUE and _code != 154:
        XID_CATALOGUE[_code] = "CONTACT_SUPPORT"

# Faults that are not XID lines, and gpufleet's class for each.
OTHER_FAULTS = {
    # A GPU the VM no longer shows comes back, if at all, with a reboot.
    "gpu_missing": "RESTART_VM",
    # Uncorrectable ECC errors: NVIDIA's memory-error guide remaps the rows
    # at the next GPU reset.
    "ecc_uncorrectable": "RESET_GPU",
    # The same guide: a pending remap is made at the next GPU reset; a remap
    # that failed puts the GPU under NVIDIA's RMA policy.
    "row_remap_pending": "RESET_GPU",
    "row_remap_failure": "CONTACT_SUPPORT",
    # NVSwitch errors, by the severity the driver writes in the SXid line
    # (NVIDIA's Fabric Manager user guide): a fatal one aborts the jobs and,
    # in a VM, asks for the VM's restart; a non-fatal one leaves the jobs
    # running and is for information. An SXid line without either word is
    # kind "sxid", which no class has: unknown.
    "sxid_fatal": "RESTART_VM",
    "sxid_non_fatal": "IGNORE",
}
SXID_KINDS = {"fatal": "sxid_fatal", "non-fatal": "sxid_non_fatal"}

XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)")
# "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 ..."
SXID_LINE = re.compile(r"nvidia-nvswitch\d*: SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<sxid>\d+)"
                       r"(?:, (?P<severity>[A-Za-z-]+))?")
# journalctl -o short-unix: "1733520000.123456 host kernel: ..."
_UNIX_TIME = re.compile(r"^(?P<t>\d{9,11}(?:\.\d+)?) ")
# dmesg: "[  123.456789] ..." (seconds since boot)
_BOOT_OFFSET = re.compile(r"^\[\s*(?P<t>\d+(?:\.\d+)?)\]")
# syslog's RFC 3339 time (Debian's rsyslog, a kern.log): "2026-12-06T22:10:00.123456+00:00 host kernel: ..."
_ISO_TIME = re.compile(r"^(?P<t>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s")


def _line_time(line: str, boot_time: float | None) -> float | None:
    match = _UNIX_TIME.match(line)
    if match:
        return float(match["t"])
    match = _BOOT_OFFSET.match(line)
    if match:
        return None if boot_time is None else boot_time + float(match["t"])
    match = _ISO_TIME.match(line)
    if match:
        text = match["t"].replace(" ", "T").replace("Z", "+00:00")
        try:
            stamp = datetime.datetime.fromisoformat(text)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            stamp = stamp.astimezone()  # the node's local time, as syslog writes it without an offset
        return stamp.timestamp()
    return None


def xid_events(text: str, boot_time: float | None = None) -> list[dict]:
    """Each XID line of a kernel log: {"code", "pci", "time"}. time is a
    Unix time, or None where the line carries none that can be read (then
    the line counts in every window: it is there, and when is unknown)."""
    events = []
    for line in text.splitlines():
        match = XID_LINE.search(line)
        if match:
            events.append({"code": int(match["xid"]), "pci": match["pci"], "time": _line_time(line, boot_time)})
    return events


def sxid_events(text: str, boot_time: float | None = None) -> list[dict]:
    """Each NVSwitch error (SXid) line of a kernel log: {"kind", "code",
    "pci" (the NVSwitch's), "time"}, kind by the line's severity
    (SXID_KINDS), else "sxid": a severity this code cannot read is unknown."""
    events = []
    for line in text.splitlines():
        match = SXID_LINE.search(line)
        if match:
            kind = SXID_KINDS.get((match["severity"] or "").lower(), "sxid")
            events.append({"kind": kind, "code": int(match["sxid"]), "pci": match["pci"],
                           "time": _line_time(line, boot_time)})
    return events


def policy_problems(classes, codes) -> list[str]:
    """What is wrong in a class policy (class -> {threshold, window_minutes})
    and a code policy (XID code -> {class, threshold, window_minutes}, each
    key optional), one sentence per problem, naming the entry."""
    problems = []
    if not isinstance(classes, dict):
        return [f"node_health_fault_policy must be a dictionary of classes (got {classes!r})"]
    if not isinstance(codes, dict):
        return [f"node_health_xid_policy must be a dictionary of XID codes (got {codes!r})"]
    for name, entry in classes.items():
        where = f"node_health_fault_policy.{name}"
        if name not in CLASSES:
            problems.append(f"{where}: {name!r} is not a class of NVIDIA's XID catalogue ({', '.join(CLASSES)})")
            continue
        problems += _entry_problems(where, entry, ("threshold", "window_minutes"))
    for code, entry in codes.items():
        where = f"node_health_xid_policy.{code}"
        if not (str(code).isdigit() and int(code) >= 1):
            problems.append(f"{where}: {code!r} is not an XID code (a whole number from 1)")
            continue
        problems += _entry_problems(where, entry, ("class", "threshold", "window_minutes"))
        if isinstance(entry, dict) and "class" in entry and entry["class"] not in CLASSES:
            problems.append(f"{where}.class: {entry['class']!r} is not a class of NVIDIA's XID catalogue "
                            f"({', '.join(CLASSES)})")
    return problems


def repair_class_problems(classes) -> list[str]:
    """What is wrong with a list of classes to repair (guard_repair_classes),
    one message per bad entry; empty when nothing is."""
    if not isinstance(classes, (list, tuple)):
        return [f"guard_repair_classes must be a list of classes (got {classes!r})"]
    problems = []
    for name in classes:
        if name in CLASSES and name not in REPAIRABLE:
            problems.append(f"guard_repair_classes: {name} asks for no repair step (its step is none); "
                            f"the classes with one: {', '.join(REPAIRABLE)}")
        elif name not in CLASSES:
            problems.append(f"guard_repair_classes: {name!r} is not a class of NVIDIA's XID catalogue "
                            f"({', '.join(REPAIRABLE)})")
    return problems


def _entry_problems(where: str, entry, keys: tuple[str, ...]) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where} must be a dictionary with {', '.join(keys)} (got {entry!r})"]
    problems = [f"{where}: {key!r} is not one of {', '.join(keys)}" for key in entry if key not in keys]
    for key in ("threshold", "window_minutes"):
        if key in entry and not (isinstance(entry[key], int) and not isinstance(entry[key], bool) and entry[key] >= 1):
            problems.append(f"{where}.{key} must be a whole number from 1 (got {entry[key]!r})")
    return problems


def rule(kind: str, code: int | None, classes: dict | None = None, codes: dict | None = None) -> dict:
    """The class, step, threshold and window that apply to one fault: the
    catalogue's (or gpufleet's, for the faults without a code), the user's
    class policy over the defaults, and the user's policy for that code
    over both."""
    own = (codes or {}).get(code, (codes or {}).get(str(code), {})) if kind == "xid" else {}
    name = own.get("class") or (XID_CATALOGUE.get(code, UNKNOWN) if kind == "xid" else OTHER_FAULTS.get(kind, UNKNOWN))
    if name == UNKNOWN:
        return {"class": UNKNOWN, "step": "none", "threshold": None, "window_minutes": None}
    limits = {**DEFAULT_POLICY[name], **(classes or {}).get(name, {}),
              **{k: v for k, v in own.items() if k in ("threshold", "window_minutes")}}
    return {"class": name, "step": CLASS_STEPS[name], **limits}


def longest_window(classes: dict | None = None, codes: dict | None = None) -> int:
    """The longest window any class or code policy asks for, in minutes:
    how far back the kernel log must be read."""
    windows = [entry["window_minutes"] for entry in DEFAULT_POLICY.values()]
    windows += [e["window_minutes"] for e in (classes or {}).values() if isinstance(e, dict) and "window_minutes" in e]
    windows += [e["window_minutes"] for e in (codes or {}).values() if isinstance(e, dict) and "window_minutes" in e]
    return max(windows)


def classify(events: list[dict], now: float, classes: dict | None = None, codes: dict | None = None) -> list[dict]:
    """One fault per kind, code and GPU: its class, the count within its
    window, and whether that count reached the threshold (tripped).

    events: {"kind" (default "xid"), "code" (None for the other faults),
    "pci", "time" (None: undated, counted), "detail" (optional)}. An
    unknown fault (a code or kind this table lacks; a source that could
    not be read) is kept with its count since the oldest line read, and is
    never tripped."""
    grouped: dict[tuple, list] = {}
    for event in events:
        key = (event.get("kind", "xid"), event.get("code"), event.get("pci", ""))
        grouped.setdefault(key, []).append(event)
    faults = []
    for (kind, code, pci), group in sorted(grouped.items(), key=lambda item: (item[0][0], item[0][1] or 0, item[0][2])):
        times = [event.get("time") for event in group]
        applies = rule(kind, code, classes, codes)
        if applies["class"] == UNKNOWN:
            counted = times
        else:
            since = now - applies["window_minutes"] * 60
            counted = [t for t in times if t is None or t >= since]
        dated = [t for t in counted if t is not None]
        faults.append({
            "kind": kind, "code": code, "pci": pci, **applies,
            "detail": next((event["detail"] for event in group if event.get("detail")), ""),
            "count": len(counted),
            "undated": len(counted) - len(dated),
            "last": max(dated) if dated else None,
            "tripped": applies["class"] != UNKNOWN and len(counted) >= applies["threshold"],
        })
    return faults
