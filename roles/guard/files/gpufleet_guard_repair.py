# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The repair ladder: a GPU fault that node_health found tripped, in a
class the user turned repair on for, is repaired one rung at a time.

node_health classifies each fault by NVIDIA's XID catalogue and says which
rung its class asks for first (gpufleet_gpu_faults.CLASS_STEPS). The guard
reads node_health's report every poll and, for each such fault:

1. asks the fleet's breaker for a place (no more than a share of the
   group in repair at once); no answer, or no place, is no action;
2. checkpoints the job: an event of the guard's action pipeline (marker,
   signal, checkpoint hook), whose final action is none;
3. takes the class's first rung, then each next one while the fault is not
   cleared: ``restart_app`` (stop the job: its scheduler starts it again),
   ``reset_gpu`` (the job stopped, then ``nvidia-smi --gpu-reset`` on that
   GPU when no process holds it), ``reboot`` (through the cloud's SDK),
   ``replace`` (marked for replacement, and left running: a person, or
   the fleet's autoscaler, replaces it);
4. after each rung, starts node_health and waits for its report. The fault
   is cleared when a report written after the rung (after the boot, for a
   reboot) has no occurrence of it since the rung and says nothing unknown
   of the node's GPUs or kernel log: an old line still in the log's window
   does not count again. A new occurrence takes the next rung.

Unknown is never acted on: a report that cannot be read or is older than
the rung, a fault seen only on undated lines, an unknown class, a GPU
whose processes cannot be listed, a breaker that does not answer: each
holds the repair where it is, visibly, and takes no further step.

One record per repair, kept in the guard's state and saved after each
step: a restarted daemon goes on from the last recorded step and never
takes one twice. A reboot is recorded before it is called, with the boot
it came from: after a restart in that same boot it is waited for, never
called again. Standard library and the node-side library only.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess

import gpufleet_guard_actions as actions
import gpufleet_process as process

RUNGS = ("restart_app", "reset_gpu", "reboot", "replace")
# What a record can be in. Open: acting, verifying, waiting (for the
# breaker) and held (on an unknown). Closed: cleared, exhausted.
ACTING, VERIFYING, WAITING, HELD, CLEARED, EXHAUSTED = (
    "acting", "verifying", "waiting", "held", "cleared", "exhausted")
OPEN = (ACTING, VERIFYING, WAITING, HELD)
STATES = OPEN + (CLEARED, EXHAUSTED)
# Faults whose kind says the node could not be read, and the kinds of fault
# each leaves unjudged (None: every kind): while one is in a report, that
# report clears none of those. Row remaps that could not be read say
# nothing of the kernel log's lines.
UNREADABLE_KINDS = {"kernel_log_unreadable": None, "gpus_unreadable": None,
                    "row_remap_unreadable": ("row_remap_pending", "row_remap_failure")}
BREAKER_GRANTED, BREAKER_FULL = 0, 3


@dataclasses.dataclass(frozen=True)
class RepairConfig:
    classes: tuple[str, ...]
    report_path: str
    verify_seconds: float = 1800.0
    reboot_wait_seconds: float = 900.0
    health_unit: str = "gpufleet-health.service"
    nvidia_smi: str = "/usr/bin/nvidia-smi"
    reboot_command: tuple[str, ...] = ()
    breaker_command: tuple[str, ...] = ()
    # The fleet breaker's group: the label that MTBI and MTTR are summed by.
    group: str = "all"


def fault_key(fault: dict) -> str:
    code = "" if fault.get("code") is None else str(fault["code"])
    return f"{fault['kind']}-{code}-{fault.get('pci', '')}"


def read_report(path: str) -> tuple[dict | None, str]:
    """node_health's report and its time (seconds), or None and why."""
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        written = datetime.datetime.fromisoformat(report["time"]).timestamp()
        faults = report["faults"]
        if not isinstance(faults, list):
            raise TypeError("faults is not a list")
    except FileNotFoundError:
        return None, f"no node_health report at {path}"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"the node_health report {path} cannot be read: {error}"
    return dict(report, written=written), ""


def verdict(report: dict | None, key: str, since: float, kind: str = "") -> tuple[str, str]:
    """Whether a report clears the fault ``key`` (of ``kind``) after a rung
    taken at ``since``: (cleared | again | wait | unknown, why)."""
    # node_health's time is when its reading began (to the millisecond).
    if report is None or report["written"] <= since:
        return "wait", "no node_health report written since the step"
    faults = report["faults"]
    same = next((f for f in faults if fault_key(f) == key), None)
    if same is not None and same.get("last") is not None and same["last"] >= since:
        return "again", f"seen again at {actions.iso(same['last'])}, after the step"
    unreadable = [f["kind"] for f in faults if f.get("kind") in UNREADABLE_KINDS
                  and (UNREADABLE_KINDS[f["kind"]] is None or kind in UNREADABLE_KINDS[f["kind"]])]
    if unreadable:
        return "unknown", f"the report could not read the node: {', '.join(unreadable)}"
    if same is not None and same.get("undated"):
        return "unknown", f"{same['undated']} line(s) without a time: whether any came after the step is unknown"
    return "cleared", "no occurrence since the step"


def smi_id(pci: str) -> str:
    """A GPU's PCI address as nvidia-smi's -i takes it (domain:bus:device.function):
    the kernel's XID lines leave the function out."""
    return pci if "." in pci else f"{pci}.0"


def _health_start(record: dict) -> str:
    """Why no report may come, said after a waiting repair's why: node_health's unit would not start."""
    return f" ({record['health_start']})" if record.get("health_start") else ""


class Ladder:
    """The open repairs in ``records`` (part of the guard's state), moved
    on each poll. ``checkpoint(event_id, detail)`` runs the guard's action
    pipeline; ``stop_job()`` stops the job's units and containers; both
    return a dict that goes into the record."""

    def __init__(self, config: RepairConfig, records: dict, save, checkpoint, stop_job, run=subprocess.run,
                 sleep=None):
        self.config, self.records, self.save = config, records, save
        self.checkpoint, self.stop_job = checkpoint, stop_job
        self.run, self.sleep = run, sleep
        # This poll's time, boot (id, uptime) and report.
        self.now, self.boot, self.report = 0.0, None, None

    def _command(self, argv, timeout: float) -> tuple[int | None, str, str]:
        return actions.command(argv, timeout, self.run)

    def poll(self, now: float, boot: tuple[str, float] | None) -> dict:
        """Each open repair moved on, and a new repair for each tripped
        fault of an enabled class that has none. Returns what was read:
        the report's problem, if any, and the tripped faults left alone
        (a class not enabled; lines without a time)."""
        self.now, self.boot = now, boot
        self.report, why = read_report(self.config.report_path)
        seen = {"report": why, "report_only": [], "unknown": []}
        for record in list(self.records.values()):
            if record["state"] in OPEN:
                self._advance(record)
        for fault in (self.report or {}).get("faults", []):
            if not fault.get("tripped"):
                continue
            key = fault_key(fault)
            if fault.get("class") not in self.config.classes:
                seen["report_only"].append({"fault": key, "class": fault.get("class"), "step": fault.get("step")})
                continue
            if any(r["fault"] == key and r["state"] in OPEN for r in self.records.values()):
                continue
            if fault.get("last") is None:
                seen["unknown"].append({"fault": key, "why": "tripped on lines without a time"})
                continue
            closed = [r["closed_at"] for r in self.records.values() if r["fault"] == key and r.get("closed_at")]
            if closed and fault["last"] <= max(closed):
                # Lines from before the last repair closed: counted once.
                continue
            self._open(fault, key)
        return seen

    def _open(self, fault: dict, key: str) -> None:
        repair_id = f"{key}-{int(self.now)}"
        record = {
            "id": repair_id, "fault": key, "kind": fault["kind"], "code": fault.get("code"),
            "pci": fault.get("pci", ""), "class": fault["class"], "first_rung": fault["step"],
            "detail": fault.get("detail", ""), "opened_at": self.now, "report_at": self.report["written"],
            "state": WAITING, "rung": None, "steps": [], "closed_at": None, "why": "",
        }
        self.records[repair_id] = record
        self.save()
        self._advance(record)

    def _log(self, record: dict, step: str, **outcome) -> None:
        record["steps"].append({"step": step, "at": self.now, **outcome})
        self.save()

    def _advance(self, record: dict) -> None:
        if record["state"] == HELD:
            if record.get("hold") == "verify":
                # Held on an unknown reading: a later report may settle it.
                record["state"] = VERIFYING
            elif record.get("hold") == "act" and self.now - record["held_at"] >= self.config.verify_seconds:
                record["state"] = ACTING
            else:
                return
        if record["state"] == WAITING:
            self._ask_breaker(record)
        if record["state"] == ACTING:
            self._act(record)
        elif record["state"] == VERIFYING:
            self._verify(record)

    def _ask_breaker(self, record: dict) -> None:
        if not self.config.breaker_command:
            record["why"] = "no fleet breaker is configured: no repair starts without one"
            return self.save()
        rc, _out, detail = self._command([*self.config.breaker_command, "acquire", record["id"]], 60)
        if rc == BREAKER_GRANTED:
            record.update(state=ACTING, why="")
            return self._log(record, "breaker", ok=True, detail=detail)
        if rc == BREAKER_FULL:
            record["why"] = f"the fleet breaker is full: {detail}"
        else:
            record["why"] = f"the fleet breaker's state is unknown (exit {rc}): {detail}"
        return self.save()

    def _act(self, record: dict) -> None:
        if not any(step["step"] == "checkpoint" for step in record["steps"]):
            # The pipeline's event resumes after its last recorded step: a
            # guard that stopped during the checkpoint never repeats one.
            outcome = self.checkpoint(f"repair-{record['id']}",
                                      f"{record['class']} fault {record['fault']}: {record['detail']}".rstrip(": "))
            self._log(record, "checkpoint", **outcome)
        rung = record["rung"] = record["rung"] or record["first_rung"]
        if rung == "restart_app":
            self._log(record, rung, **self.stop_job())
            self._await(record, since=self.now)
        elif rung == "reset_gpu":
            self._reset(record)
        elif rung == "reboot":
            self._reboot(record)
        else:
            self._log(record, "replace", ok=True,
                      detail="marked for replacement; the node is left running for a person or the autoscaler")
            self._close(record, EXHAUSTED, "the last rung: the node is to be replaced")

    def _reset(self, record: dict) -> None:
        if not record["pci"]:
            self._log(record, "reset_gpu", ok=False, detail="the fault names no GPU: nothing to reset")
            return self._escalate(record, "no GPU to reset")
        if not any(s["step"] in ("restart_app", "stop_job") for s in record["steps"]):
            self._log(record, "stop_job", **self.stop_job())
        smi, gpu = self.config.nvidia_smi, smi_id(record["pci"])
        rc, out, detail = self._command([smi, "--query-compute-apps=pid", "--format=csv,noheader", "-i", gpu], 30)
        if rc != 0:
            return self._hold(record, "act", f"which processes hold {record['pci']} is unknown "
                                             f"(nvidia-smi exit {rc}: {detail}); no reset")
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        holders = [line for line in lines if line.isdigit()]
        other = [line for line in lines if not line.isdigit() and "no running processes" not in line.lower()]
        if other:
            return self._hold(record, "act", f"nvidia-smi listed what is not a process id ({other[0][:80]!r}); "
                                             "which processes hold the GPU is unknown; no reset")
        if holders:
            # A reset fails under them; a reboot ends them.
            self._log(record, "reset_gpu", ok=False, detail=f"held by process(es) {', '.join(holders)}")
            return self._escalate(record, f"{record['pci']} is held by process(es) {', '.join(holders)}")
        rc, _out, detail = self._command([smi, "--gpu-reset", "-i", gpu], 120)
        self._log(record, "reset_gpu", ok=rc == 0, rc=rc, detail=detail)
        if rc != 0:
            return self._escalate(record, f"the reset failed (exit {rc}): {detail}")
        return self._await(record, since=self.now)

    def _reboot(self, record: dict) -> None:
        if self.boot is None:
            return self._hold(record, "act", "the boot cannot be read, so a reboot could not be told apart")
        last = record["steps"][-1] if record["steps"] else {}
        if last.get("step") == "reboot" and last.get("boot_before") != self.boot[0]:
            # The call went through (one that failed, or whose answer the
            # reboot cut off): the node rebooted.
            return self._await(record, since=self.now - self.boot[1])
        if last.get("step") == "reboot" and last.get("ok") is None:
            # The guard stopped while the call ran, in this boot: it may
            # have gone through, so it is waited for, never made again.
            last.update(detail="the guard stopped while the call ran; waited for, not made again")
            record.update(state=VERIFYING, why="waiting for the node to come back from its reboot")
            return self.save()
        if not self.config.reboot_command:
            return self._hold(record, "act", "no reboot call is configured (guard_stop_instance_id and "
                                             "guard_stop_region, or guard_stop_command)")
        # Recorded before the call: a daemon restarted in this boot waits
        # for this reboot and never calls a second one.
        self._log(record, "reboot", boot_before=self.boot[0], ok=None, detail="called")
        attempts = process.retry(lambda: self._command([*self.config.reboot_command, "reboot"], 180),
                                 lambda outcome: outcome[0] not in (0, 2), 3, 2.0, factor=2,
                                 **({"sleep": self.sleep} if self.sleep else {}))
        rc, _out, detail = attempts[-1]
        record["steps"][-1].update(ok=rc == 0, rc=rc, detail=detail, attempts=len(attempts))
        if rc != 0:
            return self._hold(record, "act", f"the reboot call failed (exit {rc}): {detail}")
        record.update(state=VERIFYING, why="waiting for the node to come back from its reboot")
        return self.save()

    def _await(self, record: dict, since: float) -> None:
        record.update(state=VERIFYING, since=since, why="waiting for a node_health report")
        record.pop("hold", None)
        record.pop("health_start", None)
        rc, _out, detail = self._command(["systemctl", "start", "--no-block", self.config.health_unit], 30)
        if rc != 0:
            # Kept while the repair waits: each poll's why says it again.
            record["health_start"] = f"starting {self.config.health_unit} failed: {detail}; its timer runs it"
            record["why"] += _health_start(record)
        self.save()

    def _verify(self, record: dict) -> None:
        if record["rung"] == "reboot" and "since" not in record:
            last = record["steps"][-1]
            if self.boot is not None and self.boot[0] != last.get("boot_before"):
                # Back from the reboot: cleared is judged from the new boot on.
                return self._await(record, since=self.now - self.boot[1])
            if self.now - last["at"] > self.config.reboot_wait_seconds:
                return self._escalate(record, f"the node did not reboot within {self.config.reboot_wait_seconds:g} s")
            return None
        outcome, why = verdict(self.report, record["fault"], record["since"], record.get("kind", ""))
        if outcome == "cleared":
            return self._close(record, CLEARED, f"cleared after {record['rung']}: {why}")
        if outcome == "again":
            return self._escalate(record, why)
        if outcome == "unknown":
            return self._hold(record, "verify", why)
        if self.now - record["since"] > self.config.verify_seconds:
            return self._hold(record, "verify", f"{why} within {self.config.verify_seconds:g} s{_health_start(record)}")
        record["why"] = why + _health_start(record)
        return None

    def _escalate(self, record: dict, why: str) -> None:
        record.update(rung=RUNGS[RUNGS.index(record["rung"]) + 1], state=ACTING,
                      why=f"not cleared by {record['rung']}: {why}")
        record.pop("since", None)
        record.pop("hold", None)
        self.save()
        self._act(record)

    def _hold(self, record: dict, where: str, why: str) -> None:
        record.update(state=HELD, hold=where, why=why, held_at=self.now)
        self.save()

    def _close(self, record: dict, state: str, why: str) -> None:
        record.update(state=state, why=why, closed_at=self.now)
        record.pop("hold", None)
        self.save()
        # A node to be replaced keeps its place in the breaker until the
        # lease runs out: it is still out of the fleet.
        if state == CLEARED and self.config.breaker_command:
            rc, _out, detail = self._command([*self.config.breaker_command, "release", record["id"]], 60)
            self._log(record, "breaker_release", ok=rc == 0, rc=rc, detail=detail)
