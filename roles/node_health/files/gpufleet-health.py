# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""GPU node health checks, installed by gpufleet.cloud.node_health.

    python3 gpufleet-health.py --config /etc/gpufleet/health.json [--nccl] [--print]

Each check ends in one of four results:

- pass: checked, and as expected;
- fail: checked, and wrong (a GPU the inventory promises and the node lacks
  is always a failure);
- skip: does not apply (no GPU is expected or present, or the check is off);
- unknown: should have been checked and could not be (no driver answered,
  the kernel log is not readable, as in a container).

The expected GPU count is the inventory's: a whole number of GPUs; a share
below 1 (a vGPU slice, Tencent's 0.25) is one partial GPU device, so the
node must show exactly one; null (the inventory does not know) makes the
gpu_count check unknown, never a pass and never a failure.

Results go to a JSON report and to node_exporter's textfile collector, both
replaced atomically. The exit code is 1 when any check fails, else 0, so
`systemctl --failed` shows a failing node too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import socket
import sys
import time
from collections import Counter
from pathlib import Path

# The node-side library (gpufleet_gpu_faults.py, gpufleet_nvidia_smi.py,
# gpufleet_process.py, gpufleet_textfile.py) is installed next to this
# script by _common's node_library step.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpufleet_gpu_faults as faults  # noqa: E402  pylint: disable=wrong-import-position
import gpufleet_process as process  # noqa: E402  pylint: disable=wrong-import-position
from gpufleet_nvidia_smi import NvidiaSmiParseError, parse_query_xml  # noqa: E402  pylint: disable=wrong-import-position
from gpufleet_nvidia_smi import query_gpus as nvidia_smi_query  # noqa: E402  pylint: disable=wrong-import-position
from gpufleet_textfile import gauge, write_atomic  # noqa: E402  pylint: disable=wrong-import-position

RESULTS = ("pass", "fail", "skip", "unknown")
QUERY = [
    "index",
    "pci.bus_id",
    "driver_version",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "pstate",
]
# The kernel log is not read where no GPU is expected or present.
NOT_READ = "not read: no GPU expected or present"
BUSBW_LINE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<value>[0-9.]+)")
# PCI class codes of NVIDIA GPUs: VGA controller and 3D controller.
GPU_PCI_CLASSES = ("0x0300", "0x0302")
# P-states in which a GPU is working; idle GPUs (P8) train their PCIe link down.
BUSY_PSTATES = ("P0", "P1", "P2")


def result(check: str, outcome: str, detail: str, **data) -> dict:
    """One check's outcome: one of RESULTS, with a sentence saying why."""
    return {"check": check, "result": outcome, "detail": detail, "data": data}


def run(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """(exit code, stdout+stderr); exit code None, and why, when the program
    is missing or did not finish."""
    done = process.run(argv, timeout)
    return done.rc, (done.why if done.rc is None else done.stdout + done.stderr)


def query_gpus(nvidia_smi: str) -> tuple[str, str, list[dict[str, str]]]:
    """(status, detail, one dict per GPU), as gpufleet_nvidia_smi.query_gpus
    gives them."""
    return nvidia_smi_query(nvidia_smi, QUERY, 60)


def pci_gpus(sysfs: Path = Path("/sys/bus/pci/devices")) -> int:
    """NVIDIA GPUs on the PCI bus, whatever the driver's state."""
    count = 0
    for dev in sysfs.glob("*"):
        try:
            vendor = (dev / "vendor").read_text().strip()
            klass = (dev / "class").read_text().strip()
        except OSError:
            continue
        if vendor == "0x10de" and klass[:6] in GPU_PCI_CLASSES:
            count += 1
    return count


def expected_count(value) -> int | float | None:
    """The configured GPU count: None when the inventory does not know it
    (gpufleet_gpu.count null), a float below 1 for a vGPU share (Tencent's
    0.25 is a quarter of one GPU), else a whole number. Never None -> 0:
    unknown is not "no GPU"."""
    if value is None or value == "":
        return None
    number = float(value)
    if number < 0 or (number >= 1 and not number.is_integer()):
        raise ValueError(f"expected_gpu_count must be null, a share below 1 or a whole number, got {value!r}")
    return int(number) if number.is_integer() else number


def devices_expected(expected: int | float | None) -> int | None:
    """GPU devices the node should show: a vGPU share is one (partial) device."""
    if expected is None:
        return None
    return 1 if 0 < expected < 1 else int(expected)


def check_gpu_count(expected: int | float | None, status: str, detail: str, gpus: list, on_pci: int) -> dict:
    found = len(gpus)
    seen = f"nvidia-smi reports {found} ({status}{': ' + detail if detail else ''}); {on_pci} NVIDIA GPU(s) on the PCI bus"
    if expected is None:
        # Neither a pass nor a failure: there is nothing to compare with.
        return result("gpu_count", "unknown", f"the inventory does not know this node's GPU count "
                      f"(gpufleet_gpu.count is null); {seen}", expected=None, found=found)
    if 0 < expected < 1:
        what = f"a vGPU share of {expected} of one GPU, seen as 1 device"
        outcome = "pass" if found == 1 else "fail"
        verb = "expects" if outcome == "pass" else "promises"
        return result("gpu_count", outcome, f"the inventory {verb} {what}; {seen}", expected=expected, found=found)
    if found == expected:
        what = "no GPU, and the node has none" if expected == 0 else f"{expected} GPU(s), all present"
        return result("gpu_count", "pass", f"the inventory expects {what}; {seen}", expected=expected, found=found)
    return result(
        "gpu_count", "fail", f"the inventory promises {expected} GPU(s); {seen}", expected=expected, found=found
    )


def check_driver(pin: str, gpus: list) -> dict:
    if not pin:
        return result("driver_version", "skip", "no driver pin set (node_health_driver_version)")
    versions = sorted({g["driver_version"] for g in gpus})
    wrong = [v for v in versions if not (v == pin or v.startswith(pin + "."))]
    if wrong:
        return result("driver_version", "fail", f"driver {', '.join(wrong)} does not match the pin {pin}", found=versions)
    return result("driver_version", "pass", f"driver {', '.join(versions)} matches the pin {pin}", found=versions)


def check_persistence(required: bool, gpus: list) -> dict:
    if not required:
        return result("persistence_mode", "skip", "not required (node_health_persistence_mode_required)")
    off = [g["index"] for g in gpus if g["persistence_mode"] != "Enabled"]
    if off:
        return result("persistence_mode", "fail", f"persistence mode is off on GPU {', '.join(off)}", gpus=off)
    return result("persistence_mode", "pass", f"persistence mode is on for all {len(gpus)} GPU(s)")


def check_ecc(required: bool, max_uncorrected: int, gpus: list) -> dict:
    unsupported = [g["index"] for g in gpus if g["ecc.mode.current"] not in ("Enabled", "Disabled")]
    disabled = [g["index"] for g in gpus if g["ecc.mode.current"] == "Disabled"]
    errors = {
        g["index"]: int(g["ecc.errors.uncorrected.volatile.total"])
        for g in gpus
        if g["ecc.mode.current"] == "Enabled" and g["ecc.errors.uncorrected.volatile.total"].isdigit()
    }
    bad = {gpu: n for gpu, n in errors.items() if n > max_uncorrected}
    problems = []
    if bad:
        problems.append(
            "uncorrectable ECC errors since the driver loaded: "
            + ", ".join(f"GPU {gpu}: {n}" for gpu, n in sorted(bad.items()))
        )
    if disabled and required:
        problems.append(f"ECC is disabled on GPU {', '.join(disabled)}")
    if problems:
        return result("ecc", "fail", "; ".join(problems), uncorrected=errors)
    if len(unsupported) == len(gpus):
        return result("ecc", "skip", "these GPUs do not support ECC")
    return result("ecc", "pass", f"no uncorrectable ECC errors above {max_uncorrected}", uncorrected=errors)


def read_row_remaps(nvidia_smi: str) -> tuple[str, list[dict]]:
    """(why they could not be read, or ""; one {pci, pending, failure} per
    GPU) from nvidia-smi's XML report: --query-gpu has no row-remap field."""
    done = process.run([nvidia_smi, "-q", "-x"], 60)
    if done.rc is None:
        return f"nvidia-smi -q -x: {done.why}", []
    if done.rc != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        return f"nvidia-smi -q -x exit {done.rc}{': ' + said[0] if said else ''}", []
    try:
        gpus = parse_query_xml(done.stdout)["gpus"]
    except NvidiaSmiParseError as err:
        return str(err), []
    return "", [{"pci": g["pci_bus_id"], "pending": g["row_remap"]["pending"], "failure": g["row_remap"]["failure"]}
                for g in gpus]


def check_row_remap(read: tuple[str, list[dict]], gpus: list) -> dict:
    """Fails on a GPU whose row remap waits for a reset or failed (NVIDIA's
    memory error guide); skip where no GPU remaps rows (before Ampere);
    unknown where the flags could not be read, or not for every GPU."""
    why, remaps = read
    if why:
        return result("row_remap", "unknown", f"row remapping could not be read: {why}")
    if len(remaps) != len(gpus):
        return result("row_remap", "unknown", f"nvidia-smi -q -x lists {len(remaps)} GPU(s) and its query "
                      f"{len(gpus)}: which GPU's remaps are which is unknown")
    half = [r["pci"] for r in remaps if (r["pending"] is None) != (r["failure"] is None)]
    if half:
        return result("row_remap", "unknown", f"GPU {', '.join(half)} reports only one of the pending and failure flags")
    failed = [r["pci"] for r in remaps if r["failure"]]
    pending = [r["pci"] for r in remaps if r["pending"]]
    problems = ([f"row remapping failed on GPU {', '.join(failed)}"] if failed else []) + \
        ([f"a row remap waits for a reset of GPU {', '.join(pending)}"] if pending else [])
    if problems:
        return result("row_remap", "fail", "; ".join(problems), failed=failed, pending=pending)
    if all(r["pending"] is None for r in remaps):
        return result("row_remap", "skip", "these GPUs do not remap rows (before Ampere)")
    return result("row_remap", "pass", f"no pending or failed row remap on {len(remaps)} GPU(s)",
                  failed=[], pending=[])


def check_pcie(enabled: bool, gpus: list) -> dict:
    if not enabled:
        return result("pcie_link", "skip", "not enabled (node_health_pcie_enabled)")
    narrow, slow, idle = [], [], []
    for g in gpus:
        width, width_max = g["pcie.link.width.current"], g["pcie.link.width.max"]
        gen, gen_max = g["pcie.link.gen.current"], g["pcie.link.gen.max"]
        if width.isdigit() and width_max.isdigit() and int(width) < int(width_max):
            narrow.append(f"GPU {g['index']} x{width} of x{width_max}")
        if gen.isdigit() and gen_max.isdigit() and int(gen) < int(gen_max):
            (slow if g["pstate"] in BUSY_PSTATES else idle).append(f"GPU {g['index']} gen{gen} of gen{gen_max}")
    if narrow or slow:
        return result("pcie_link", "fail", "PCIe link below its maximum: " + ", ".join(narrow + slow))
    if idle:
        return result(
            "pcie_link",
            "unknown",
            "widths are at their maximum; link speed not checkable now: idle GPUs train their link down ("
            + ", ".join(idle)
            + ")",
        )
    return result("pcie_link", "pass", f"PCIe width and speed at their maximum on all {len(gpus)} GPU(s)")


def boot_time(stat: Path = Path("/proc/stat")) -> float | None:
    """When the node booted (Unix time), for dmesg's seconds since boot."""
    try:
        for line in stat.read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def read_kernel_log(window_minutes: int, path: str = "") -> tuple[str | None, str]:
    """(text, source); text None when no kernel log is readable. `path`: a
    file to read instead (a syslog kern.log), each line with its time.
    journald with no kernel message at all for this boot means it cannot
    see the kernel log (a container), not that the kernel said nothing."""
    if path:
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace"), path
        except OSError as err:
            return None, f"the kernel log {path} is not readable ({err.strerror})"
    rc, out = run(["journalctl", "-k", "-b", "-n", "1", "-q", "--no-pager"], timeout=30)
    if rc == 0 and out.strip():
        # With each line's time: a fault's window may be shorter than the read.
        rc, out = run(["journalctl", "-k", "-q", "--no-pager", "-o", "short-unix", f"--since=-{window_minutes}min"],
                      timeout=60)
        if rc == 0:
            return out, f"journald, last {window_minutes} min"
    rc, out = run(["dmesg"], timeout=30)
    if rc == 0 and out.strip():
        return out, "dmesg, since boot"
    return None, "no kernel log is readable here (journald has no kernel messages and dmesg fails)"


def read_kernel_events(window_minutes: int, path: str) -> tuple[list[dict] | None, str]:
    """Every XID and SXid (NVSwitch) line of the kernel log read
    `window_minutes` back, each with its kind and time (see
    gpufleet_gpu_faults.xid_events and sxid_events), and the source; None
    when no kernel log is readable."""
    text, source = read_kernel_log(window_minutes, path)
    if text is None:
        return None, source
    booted = boot_time()
    return [{"kind": "xid", **line} for line in faults.xid_events(text, booted)] + \
        faults.sxid_events(text, booted), source


def recent_lines(lines: list[dict], kind: str, since: float) -> Counter:
    """The kernel log's lines of one kind since `since`, counted by (PCI
    address, code); an undated line counts: it is there, and when is
    unknown."""
    return Counter((line["pci"], line["code"]) for line in lines
                   if line["kind"] == kind and (line["time"] is None or line["time"] >= since))


def check_xid(read: tuple[list[dict] | None, str], window_minutes: int, ignore: list[int], applies: bool,
              no_gpu_reason: str, now: float) -> tuple[dict, dict]:
    """The xid check over read_kernel_events()' XID lines within its own
    window (an undated line counts); each code named with its catalogue
    class."""
    if not applies:
        return result("xid", "skip", no_gpu_reason), {}
    lines, source = read
    if lines is None:
        return result("xid", "unknown", source), {}
    events = {(pci, str(code)): n for (pci, code), n in recent_lines(lines, "xid", now - window_minutes * 60).items()}
    counted = {key: n for key, n in events.items() if int(key[1]) not in ignore}
    if counted:
        summary = ", ".join(f"XID {xid} ({faults.XID_CATALOGUE.get(int(xid), faults.UNKNOWN)}) on {pci} x{n}"
                            for (pci, xid), n in sorted(counted.items()))
        return result("xid", "fail", f"{summary} ({source})"), events
    note = f"; ignored: {sorted({int(key[1]) for key in events})}" if events else ""
    return result("xid", "pass", f"no XID events ({source}){note}"), events


def check_sxid(read: tuple[list[dict] | None, str], window_minutes: int, applies: bool, no_gpu_reason: str,
               now: float) -> dict:
    """Fails on a fatal NVSwitch error (SXid) line within the xid check's
    window; unknown on one whose severity is not written as the driver
    writes it; non-fatal ones are counted in the detail."""
    if not applies:
        return result("sxid", "skip", no_gpu_reason)
    lines, source = read
    if lines is None:
        return result("sxid", "unknown", source)
    since = now - window_minutes * 60
    recent = {kind: recent_lines(lines, kind, since) for kind in ("sxid_fatal", "sxid_non_fatal", "sxid")}

    def named(kind: str) -> str:
        return ", ".join(f"SXid {code} on {pci} x{n}" for (pci, code), n in sorted(recent[kind].items()))
    others = f"; non-fatal: {named('sxid_non_fatal')}" if recent["sxid_non_fatal"] else ""
    if recent["sxid_fatal"]:
        return result("sxid", "fail", f"fatal NVSwitch errors: {named('sxid_fatal')} ({source}){others}")
    if recent["sxid"]:
        return result("sxid", "unknown", f"NVSwitch errors of a severity this check cannot read: {named('sxid')} "
                      f"({source}){others}")
    return result("sxid", "pass", f"no fatal NVSwitch error ({source}){others}")


def check_nccl(cfg: dict, requested: bool, gpus: list) -> tuple[dict, float | None]:
    if not cfg.get("enabled"):
        return result("nccl_busbw", "skip", "not enabled (node_health_nccl_enabled)"), None
    if not requested:
        return result("nccl_busbw", "skip", "runs from playbooks/health.yml, not from the timer"), None
    argv = [cfg["binary"], *cfg.get("args", []), "-g", str(len(gpus))]
    rc, out = run(argv, timeout=float(cfg.get("timeout_seconds", 900)))
    match = BUSBW_LINE.search(out)
    if rc is None or rc != 0 or not match:
        last = out.strip().splitlines()[-1] if out.strip() else ""
        return result("nccl_busbw", "unknown", f"{cfg['binary']} gave no bus bandwidth (exit {rc}): {last}"), None
    busbw = float(match["value"])
    minimum = float(cfg["min_busbw_gbps"])
    outcome = "pass" if busbw >= minimum else "fail"
    return result("nccl_busbw", outcome, f"all_reduce bus bandwidth {busbw} GB/s, minimum {minimum}"), busbw


def fault_events(read: tuple[list[dict] | None, str], checks: list[dict], expected, smi: tuple[str, str, list],
                 ecc_limit: int, now: float) -> list[dict]:
    """The faults gpufleet_gpu_faults classifies: each XID and SXid line
    read; a GPU the inventory promises that nvidia-smi does not list; each
    GPU whose uncorrectable ECC errors failed the ecc check; each GPU whose
    row remap is pending or failed. A kernel log that should have been read
    and was not, promised GPUs nvidia-smi could not be asked about, and row
    remaps that could not be read are faults of an unknown kind: seen,
    never acted on."""
    lines, source = read
    status, detail, gpus = smi
    events = list(lines or [])
    if lines is None and source != NOT_READ:
        events.append({"kind": "kernel_log_unreadable", "code": None, "pci": "", "time": now, "detail": source})
    by_check = {c["check"]: c for c in checks}
    if by_check["gpu_count"]["result"] == "fail" and expected is not None and len(gpus) < devices_expected(expected):
        if status in ("ok", "no_gpu"):
            events.append({"kind": "gpu_missing", "code": None, "pci": "", "time": now,
                           "detail": by_check["gpu_count"]["detail"]})
        else:
            events.append({"kind": "gpus_unreadable", "code": None, "pci": "", "time": now,
                           "detail": f"nvidia-smi: {status}{': ' + detail if detail else ''}"})
    ecc = by_check.get("ecc", {})
    if ecc.get("result") == "fail":
        bus = {g["index"]: g["pci.bus_id"] for g in gpus}
        for gpu, count in sorted(ecc["data"].get("uncorrected", {}).items()):
            if count > ecc_limit:
                events.append({"kind": "ecc_uncorrectable", "code": None, "pci": bus.get(gpu, gpu), "time": now})
    remap = by_check.get("row_remap", {})
    for flag in ("failed", "pending"):
        for pci in remap.get("data", {}).get(flag, []):
            kind = "row_remap_failure" if flag == "failed" else "row_remap_pending"
            events.append({"kind": kind, "code": None, "pci": pci, "time": now})
    if remap.get("result") == "unknown" and gpus:
        events.append({"kind": "row_remap_unreadable", "code": None, "pci": "", "time": now,
                       "detail": remap["detail"]})
    return events


def run_checks(cfg: dict, nccl: bool, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    classes, codes = cfg.get("fault_policy", {}), cfg.get("xid_policy", {})
    problems = faults.policy_problems(classes, codes)
    if problems:
        raise ValueError("; ".join(problems))
    expected = expected_count(cfg["expected_gpu_count"])
    status, detail, gpus = query_gpus(cfg["nvidia_smi"])
    on_pci = pci_gpus()
    checks = [check_gpu_count(expected, status, detail, gpus, on_pci)]
    gpu_checks_apply = bool(gpus)
    if gpus:
        no_gpu = ""
    elif expected == 0:
        no_gpu = f"no GPU on this node ({status})"
    elif expected is None:
        no_gpu = f"could not check: the inventory does not know this node's GPUs and none answered ({status})"
    else:
        no_gpu = f"could not check: the inventory promises {expected} GPU(s) and none answered ({status})"
    # An unknown count may hide GPUs: their kernel log is read all the same,
    # as far back as the check or any fault's window needs.
    xid_window = int(cfg["xid_window_minutes"])
    xid_applies = expected != 0 or bool(gpus)
    read = read_kernel_events(max(xid_window, faults.longest_window(classes, codes)), cfg.get("kernel_log", "")) \
        if xid_applies else (None, NOT_READ)
    xid, events = check_xid(read, xid_window, [int(x) for x in cfg["xid_ignore"]], xid_applies, no_gpu, now)
    sxid = check_sxid(read, xid_window, xid_applies, no_gpu, now)
    busbw = None
    if gpu_checks_apply:
        checks += [
            check_driver(cfg["driver_version"], gpus),
            check_persistence(bool(cfg["persistence_mode"]), gpus),
            xid,
            sxid,
            check_ecc(bool(cfg["ecc_required"]), int(cfg["ecc_max_uncorrected"]), gpus),
            check_row_remap(read_row_remaps(cfg["nvidia_smi"]), gpus),
            check_pcie(bool(cfg["pcie"]), gpus),
        ]
        nccl_result, busbw = check_nccl(cfg["nccl"], nccl, gpus)
        checks.append(nccl_result)
    else:
        outcome = "skip" if expected == 0 else "unknown"
        checks += [result(name, outcome, no_gpu) for name in ("driver_version", "persistence_mode")]
        checks += [xid, sxid]
        checks += [result(name, outcome, no_gpu) for name in ("ecc", "row_remap", "pcie_link", "nccl_busbw")]
    outcomes = {c["result"] for c in checks}
    overall = "fail" if "fail" in outcomes else ("unknown" if "unknown" in outcomes else "pass")
    return {
        "node": socket.gethostname(),
        # To the millisecond: the guard's repair ladder starts a run right
        # after a rung and must tell a report begun after it from one before.
        "time": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(timespec="milliseconds"),
        "status": overall,
        "gpus_expected": expected,
        "gpu_devices_expected": devices_expected(expected),
        "gpus_found": len(gpus),
        "nvidia_smi": {"status": status, "detail": detail},
        "pci_nvidia_gpus": on_pci,
        "checks": checks,
        "xid_events": [{"pci": pci, "xid": int(xid), "count": n} for (pci, xid), n in sorted(events.items())],
        # Report only: what each fault's class asks for, and whether its
        # count reached the threshold (gpufleet_gpu_faults; docs/node-doctor.md).
        "faults": faults.classify(
            fault_events(read, checks, expected, (status, detail, gpus), int(cfg["ecc_max_uncorrected"]), now),
            now, classes, codes),
        "nccl_busbw_gbps": busbw,
    }


def metrics(report: dict, now: float) -> str:
    lines = gauge("gpufleet_health_check", "Result of each node_health check: 1 for its result, 0 for the others.",
                  [({"check": check["check"], "result": outcome}, check["result"] == outcome)
                   for check in report["checks"] for outcome in RESULTS])
    lines += gauge("gpufleet_health_gpus_expected",
                   "GPUs the inventory promises on this node (below 1: a vGPU share; NaN: unknown).",
                   [({}, None if report["gpus_expected"] is None else str(report["gpus_expected"]))])
    lines += gauge("gpufleet_health_gpus_found", "GPUs nvidia-smi reports on this node.", [({}, report["gpus_found"])])
    lines += gauge("gpufleet_health_xid_events", "XID lines in the kernel log within the check's window.",
                   [({"pci": e["pci"], "xid": e["xid"]}, e["count"]) for e in report["xid_events"]])
    labels = [({"kind": f["kind"], "code": "" if f["code"] is None else f["code"], "pci": f["pci"],
                "class": f["class"], "step": f["step"]}, f) for f in report["faults"]]
    lines += gauge("gpufleet_health_fault_count",
                   "Occurrences of a GPU fault within its class's window (unknown: since the oldest line read).",
                   [(label, f["count"]) for label, f in labels])
    lines += gauge("gpufleet_health_fault_tripped",
                   "1 when a fault's count reached its class's threshold; never for an unknown class.",
                   [(label, f["tripped"]) for label, f in labels])
    if report["nccl_busbw_gbps"] is not None:
        lines += gauge("gpufleet_health_nccl_busbw_gbps", "all_reduce_perf average bus bandwidth, GB/s.",
                       [({}, str(report["nccl_busbw_gbps"]))])
    lines += gauge("gpufleet_health_last_run_timestamp_seconds", "When the checks last ran.", [({}, f"{now:.3f}")])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="GPU node health checks (gpufleet)")
    parser.add_argument("--config", default="/etc/gpufleet/health.json")
    parser.add_argument("--nccl", action="store_true", help="also run the NCCL bandwidth check when it is enabled")
    parser.add_argument("--print", action="store_true", help="print the JSON report on stdout")
    args = parser.parse_args(argv)
    cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))
    now = time.time()
    report = run_checks(cfg, args.nccl or bool(cfg["nccl"].get("on_timer")), now)
    text = json.dumps(report, indent=2) + "\n"
    write_atomic(cfg["report"], text)
    write_atomic(cfg["textfile"], metrics(report, now))
    if args.print:
        sys.stdout.write(text)
    return 1 if report["status"] == "fail" else 0


if __name__ == "__main__":
    sys.exit(main())
