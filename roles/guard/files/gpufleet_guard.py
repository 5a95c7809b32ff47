# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet-guard: the node daemon that protects a GPU node's money.

Every poll (5 s by default) it reads the spot notice (gpufleet_guard_notice),
the cloud's scheduled maintenance (gpufleet_guard_maintenance), GPU
utilisation and the activity sources (gpufleet_guard_probes), decides
(gpufleet_guard_triggers) and, for each event, runs the action pipeline
once (gpufleet_guard_actions). Where repair is on for a class of GPU
fault, it moves the repair ladder on (gpufleet_guard_repair) from
node_health's report. Its state (idle arming, the running time
across boots, every event's recorded steps) is written to disk after each
change, so a restarted daemon neither fires an event again nor forgets
the spend. Its metrics go to node_exporter's textfile directory.

Usage: gpufleet-guard [--config PATH] [--once]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time

import gpufleet_guard_actions as actions
import gpufleet_guard_maintenance as maintenance
import gpufleet_guard_notice as notice
import gpufleet_gpu_faults as faults
import gpufleet_guard_probes as probes
import gpufleet_guard_repair as repair
import gpufleet_guard_triggers as triggers
import gpufleet_textfile as textfile

CONFIG_PATH = "/etc/gpufleet/guard/config.json"
# "off": not a spot node (guard_spot_enabled false), where no notice is read.
SPOT_OFF = "off"
SPOT_STATES = (notice.NOTICE, notice.WARNING, notice.CLEAR, notice.UNKNOWN, notice.UNSUPPORTED, SPOT_OFF)
BUDGET_STATES = (triggers.OK, triggers.ALARM, triggers.CAP, triggers.UNKNOWN)
# "off": guard_maintenance_enabled false, or no cloud set.
MAINTENANCE_OFF = "off"
MAINTENANCE_STATES = maintenance.STATES + (MAINTENANCE_OFF,)


class ConfigError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Config:
    cloud: str
    spot: bool
    metadata_endpoint: str | None
    poll_seconds: float
    idle: triggers.IdleConfig | None
    idle_units: tuple[str, ...]
    idle_ssh: bool
    activity_file: str
    budget: triggers.BudgetConfig
    budget_job_unit: str
    checkpoint_seconds: float
    maintenance: bool
    maintenance_lead_seconds: float
    actions: actions.ActionConfig
    # None: no class of GPU fault is repaired (report only).
    repair: repair.RepairConfig | None
    state_path: str
    textfile_dir: str
    nvidia_smi: str
    # The repairs as `gpufleet guard status` reads them (readable by all).
    repairs_path: str = ""
    # Alibaba, Tencent, Huawei: the instance program that reads the cloud's
    # events through its API (empty: not read, and why), and how often.
    maintenance_command: tuple[str, ...] = ()
    maintenance_not_read: str = ""
    maintenance_interval_seconds: float = 300
    maintenance_timeout_seconds: float = 120


def load_config(path: str) -> Config:
    """The role writes this file; a hand-edited one that is wrong fails here,
    naming the key, before the daemon polls anything."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: {error}") from None
    try:
        idle, budget, act = raw.get("idle") or {}, raw.get("budget") or {}, raw["actions"]
        maint = raw.get("maintenance") or {}
        cloud = raw["cloud"]
        if raw.get("spot") and cloud not in notice.READERS:
            raise ConfigError(f"spot is on, so cloud must be one of {', '.join(sorted(notice.READERS))}, not {cloud!r}")
        idle_config = None
        if idle.get("enabled"):
            idle_config = triggers.IdleConfig(float(idle["threshold_percent"]), float(idle["window_seconds"]),
                                              float(idle["grace_seconds"]))
        config = Config(
            cloud=cloud, spot=bool(raw.get("spot")), metadata_endpoint=raw.get("metadata_endpoint"),
            poll_seconds=float(raw.get("poll_seconds", 5)), idle=idle_config,
            idle_units=tuple(idle.get("units", ())), idle_ssh=bool(idle.get("ssh", True)),
            activity_file=idle.get("activity_file", ""),
            budget=triggers.BudgetConfig(
                None if budget.get("price_per_hour") is None else float(budget["price_per_hour"]),
                None if budget.get("node_cap") is None else float(budget["node_cap"]),
                None if budget.get("job_cap") is None else float(budget["job_cap"]),
                float(budget.get("alarm_ratio", 0.8))),
            budget_job_unit=budget.get("job_unit", ""),
            checkpoint_seconds=float(act.get("checkpoint_seconds", 300)),
            maintenance=bool(maint.get("enabled", False)),
            maintenance_lead_seconds=float(maint.get("lead_seconds", 1800)),
            actions=actions.ActionConfig(
                marker_path=act["marker_path"], signal=act.get("signal", "SIGTERM"),
                job_units=tuple(act.get("job_units", ())), job_containers=tuple(act.get("job_containers", ())),
                hook=tuple(act.get("hook", ())), hook_margin_seconds=float(act.get("hook_margin_seconds", 10)),
                final_action=act.get("final_action", "none"), stop_command=tuple(act.get("stop_command", ())),
                stop_attempts=int(act.get("stop_attempts", 5)),
                stop_backoff_seconds=float(act.get("stop_backoff_seconds", 2))),
            repair=load_repair(raw.get("repair") or {}, raw["nvidia_smi"]),
            state_path=raw["state_path"], textfile_dir=raw["textfile_dir"], nvidia_smi=raw["nvidia_smi"],
            repairs_path=raw.get("repairs_path", ""),
            maintenance_command=tuple(maint.get("command") or ()), maintenance_not_read=maint.get("not_read", ""),
            maintenance_interval_seconds=float(maint.get("interval_seconds", 300)),
            maintenance_timeout_seconds=float(maint.get("timeout_seconds", 120)))
    except KeyError as error:
        raise ConfigError(f"{path}: the key {error.args[0]!r} is missing") from None
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{path}: {error}") from None
    if config.poll_seconds <= 0:
        raise ConfigError(f"{path}: poll_seconds must be above 0, not {config.poll_seconds:g}")
    for key in ("lead_seconds", "interval_seconds", "timeout_seconds"):
        if getattr(config, "maintenance_" + key) <= 0:
            raise ConfigError(f"{path}: maintenance.{key} must be above 0, not {getattr(config, 'maintenance_' + key):g}")
    return config


def load_repair(raw: dict, nvidia_smi: str) -> repair.RepairConfig | None:
    classes = raw.get("classes") or []
    problems = faults.repair_class_problems(classes)
    if problems:
        raise ConfigError("repair: " + "; ".join(problems))
    if not classes:
        return None
    return repair.RepairConfig(
        classes=tuple(classes), report_path=raw["report_path"], verify_seconds=float(raw.get("verify_seconds", 1800)),
        reboot_wait_seconds=float(raw.get("reboot_wait_seconds", 900)),
        health_unit=raw.get("health_unit", "gpufleet-health.service"), nvidia_smi=nvidia_smi,
        reboot_command=tuple(raw.get("reboot_command") or ()), breaker_command=tuple(raw.get("breaker_command") or ()),
        group=str(raw.get("group") or "all"))


def load_state(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        state = {}
    return {"idle": state.get("idle", {}), "meter": state.get("meter", {}), "events": state.get("events", {}),
            "repairs": state.get("repairs", {}), "repair_since": state.get("repair_since")}


def save_state(path: str, state: dict) -> None:
    # Only root reads it; on disk before the rename, so a power cut leaves
    # the old record or the new one, and an event is never acted on twice.
    textfile.write_atomic(path, json.dumps(state, indent=1, sort_keys=True), make_dirs=True, mode=0o600, sync=True)


class Guard:
    """One poll at a time; the readings and decisions of the last poll are
    kept for the metrics."""

    def __init__(self, config: Config, clock=time.time, reader=None, read=probes, pipeline_run=None,
                 maintenance_reader=None):
        self.config = config
        self.clock = clock
        self.read = read
        self.state = load_state(config.state_path)
        self.idle_state = triggers.IdleState(**self.state["idle"])
        self.meter = triggers.Meter(**self.state["meter"])
        self.reader = reader or (notice.reader_for(config.cloud, config.metadata_endpoint) if config.spot else None)
        # Its own reader (and token): maintenance is read on every node, spot or not.
        self.maintenance_reader = maintenance_reader or self._maintenance_source(config)
        kwargs = {"run": pipeline_run} if pipeline_run else {}
        self.pipeline = actions.Pipeline(config.actions, self.state["events"], self.save, clock=clock, **kwargs)
        self.ladder = repair.Ladder(config.repair, self.state["repairs"], self.save, self._checkpoint,
                                    self.pipeline.stop_job, **kwargs) if config.repair else None
        if config.repair and self.state["repair_since"] is None:
            # Since when faults are watched for repair: the time MTBI divides.
            self.state["repair_since"] = clock()

    @staticmethod
    def _maintenance_source(config: Config):
        """AWS's metadata reader; the API call in the background for the
        clouds that document their events through the API only; else why
        they are not read."""
        if not config.maintenance:
            return None
        if config.cloud in maintenance.API_CLOUDS:
            if not config.maintenance_command:
                return config.maintenance_not_read or "the cloud's events need the instance program"
            return maintenance.ApiSource(config.cloud, config.maintenance_command,
                                         config.maintenance_interval_seconds, config.maintenance_timeout_seconds)
        return notice.reader_for(config.cloud, config.metadata_endpoint) if config.cloud in notice.READERS else None

    def _checkpoint(self, event_id: str, detail: str) -> dict:
        """A repair's checkpoint: the action pipeline's event, whose final
        action is none (the ladder's rungs come after it)."""
        record = self.pipeline.handle(actions.Event(event_id, "repair", detail,
                                                    self.clock() + self.config.checkpoint_seconds, final_action="none"))
        return {"event": event_id, "landed": record["hook"]["landed"]}

    def save(self) -> None:
        self.state["idle"] = dataclasses.asdict(self.idle_state)
        self.state["meter"] = dataclasses.asdict(self.meter)
        save_state(self.config.state_path, self.state)

    def poll(self) -> dict:
        now, config = self.clock(), self.config
        result = {"at": now, "events": []}
        boot = self.read.boot()
        result["boot_known"] = boot is not None

        # Spot: only a notice is an event; everything else is reported.
        reading = self.reader.read() if self.reader else notice.Reading(SPOT_OFF, detail="not a spot node")
        result["spot"] = reading
        if reading.triggers:
            result["events"].append(actions.Event(reading.event_id, "spot", f"{reading.kind}: {reading.detail}",
                                                  reading.deadline))

        # Maintenance: each window the cloud scheduled is an event once it
        # is `lead` away, its deadline the window's start; the cloud's own
        # reboot or stop is the final action.
        planned = (maintenance.read(self.maintenance_reader, config.cloud, now) if config.maintenance
                   else maintenance.Reading(MAINTENANCE_OFF, detail="off: guard_maintenance_enabled, or no guard_cloud"))
        result["maintenance"] = planned
        for window in maintenance.due(planned, now, config.maintenance_lead_seconds):
            detail = f"{window.code} from {actions.iso(window.not_before)}"
            if window.not_after is not None:
                detail += f" to {actions.iso(window.not_after)}"
            if window.description:
                detail += f": {window.description}"
            result["events"].append(actions.Event(f"maintenance-{window.event_id}", "maintenance", detail,
                                                  window.not_before, final_action="none"))

        # Idle: every source is read, and unknown counts as active.
        if config.idle is not None:
            sources = {f"job unit {unit}": self.read.unit_active(unit) for unit in config.idle_units}
            if config.idle_ssh:
                sources["SSH sessions"] = self.read.ssh_sessions()
            if config.activity_file:
                sources[f"activity file {config.activity_file}"] = self.read.file_touched(
                    config.activity_file, config.idle.window_seconds, now)
            # Grace counts from the node's boot; an unknown boot arms nothing early.
            started_at = now - boot[1] if boot else now
            utilization = self.read.gpu_utilization(config.nvidia_smi)
            idle = triggers.step_idle(config.idle, self.idle_state, utilization, sources, now, started_at)
            result["idle"] = idle
            if idle.triggered:
                boot_id = boot[0] if boot else "unknown-boot"
                result["events"].append(actions.Event(f"idle-{boot_id}-{int(self.idle_state.idle_since)}", "idle",
                                                      idle.reason, now + config.checkpoint_seconds))

        # Budget: the running time summed over boots, and the job's own.
        running = self.meter.update(*boot) if boot else None
        job = self.read.job_seconds(config.budget_job_unit) if config.budget_job_unit else None
        verdict = (triggers.budget(config.budget, running, job) if running is not None
                   else triggers.BudgetVerdict(triggers.UNKNOWN, None, None, "the running time cannot be read"))
        result["budget"] = verdict
        if verdict.state == triggers.CAP:
            cap_id = f"budget-{config.budget.node_cap}-{config.budget.job_cap}"
            if job is not None and config.budget.job_cap is not None and verdict.job_spend >= config.budget.job_cap:
                cap_id += f"-{config.budget_job_unit}-{int(now - job)}"
            result["events"].append(actions.Event(cap_id, "budget", verdict.reason, now + config.checkpoint_seconds))

        result["records"] = [self.pipeline.handle(event) for event in result["events"]]
        # After the events: a spot notice's checkpoint comes before a repair.
        result["repair"] = self.ladder.poll(self.clock(), boot) if self.ladder else None
        result["repair_since"] = self.state["repair_since"]
        self.save()
        write_metrics(config, result, self.state["events"], self.state["repairs"])
        if config.repair is not None and config.repairs_path:
            write_repairs(config.repairs_path, self.state["repairs"], result["at"])
        return result


# How long a closed repair stays in the metrics: a day of dashboards.
REPAIR_SHOWN_SECONDS = 86400


def shown_repairs(repairs: dict, now: float) -> list[dict]:
    """The repairs the metrics and the status show: the open ones, and
    those closed within a day."""
    return [r for r in repairs.values() if r["state"] in repair.OPEN or now - r["closed_at"] < REPAIR_SHOWN_SECONDS]


def write_repairs(path: str, repairs: dict, now: float) -> None:
    """Each shown repair with why it is where it is and its steps, for
    `gpufleet guard status`: no secret is in a repair, and the state file
    is root's only."""
    fields = ("id", "fault", "class", "rung", "first_rung", "state", "why", "opened_at", "closed_at")
    body = {"written": now, "repairs": [
        {**{f: r.get(f) for f in fields},
         "steps": [{k: s.get(k) for k in ("step", "at", "ok", "detail")} for s in r["steps"]]}
        for r in sorted(shown_repairs(repairs, now), key=lambda r: r["opened_at"])]}
    textfile.write_atomic(path, json.dumps(body, indent=1, sort_keys=True) + "\n", make_dirs=True)


def repair_metrics(config: Config, result: dict, repairs: dict) -> list[str]:
    """The repairs, open and lately closed, each with its rung and state;
    how many there are in each state; what was found tripped in a class
    repair is off for; whether node_health's report could be read."""
    if config.repair is None:
        return []
    seen, shown = result["repair"], shown_repairs(repairs, result["at"])
    lines = textfile.gauge(
        "gpufleet_guard_repair_state",
        "A repair of a GPU fault: 1 on its state and rung (open ones, and those closed within a day).",
        [({"fault": r["fault"], "class": r["class"], "rung": r["rung"] or r["first_rung"], "state": r["state"]}, 1)
         for r in shown])
    lines += textfile.gauge(
        "gpufleet_guard_repairs",
        "Repairs this node's guard keeps, by state.",
        [({"state": state}, sum(r["state"] == state for r in repairs.values())) for state in repair.STATES])
    lines += textfile.gauge(
        "gpufleet_guard_repair_report_only",
        "A tripped GPU fault in a class repair is not on for: the step it would take.",
        [({"fault": f["fault"], "class": f["class"], "step": f["step"]}, 1) for f in seen["report_only"]])
    lines += textfile.gauge(
        "gpufleet_guard_repair_report_readable",
        "1 if node_health's report could be read at the last poll.",
        [({}, int(not seen["report"]))])
    # MTBI and MTTR (the monitoring role's recording rules divide these):
    # every repair the guard keeps is one incident; a cleared one took
    # from its opening (the breaker's wait included) to its clearing.
    group = {"group": config.repair.group}
    cleared = [r for r in repairs.values() if r["state"] == repair.CLEARED and r.get("closed_at") is not None]
    lines += textfile.gauge(
        "gpufleet_guard_repair_watched_since_timestamp_seconds",
        "Since when this node's guard has watched for GPU faults to repair (the time MTBI divides).",
        [(group, result.get("repair_since"))])
    lines += textfile.counter(
        "gpufleet_guard_repair_incidents_total",
        "GPU faults this node's guard opened a repair for (its breaker group in the label).",
        [(group, len(repairs))])
    lines += textfile.counter(
        "gpufleet_guard_repair_cleared_total", "Repairs that cleared their fault.", [(group, len(cleared))])
    lines += textfile.counter(
        "gpufleet_guard_repair_cleared_seconds_total",
        "Seconds from each cleared repair's opening to its clearing, summed.",
        [(group, float(sum(r["closed_at"] - r["opened_at"] for r in cleared)))])
    return lines


def write_metrics(config: Config, result: dict, events: dict, repairs: dict) -> None:
    """Unknown is NaN (and a state label of its own), never 0: an alert on
    0 must not read "no notice" where the guard could not tell."""
    lines: list[str] = []
    spot = result["spot"]
    lines += textfile.gauge(
        "gpufleet_guard_spot_state",
        "The spot notice as last read, one series per state (1: current).",
        [({"cloud": config.cloud, "state": s}, int(spot.state == s)) for s in SPOT_STATES])
    lines += textfile.gauge(
        "gpufleet_guard_spot_deadline_timestamp_seconds",
        "When the cloud will reclaim the node (NaN: no notice).",
        [({"cloud": config.cloud}, spot.deadline if spot.state == notice.NOTICE else None)])
    planned = result["maintenance"]
    lines += textfile.gauge(
        "gpufleet_guard_maintenance_state",
        "The cloud's scheduled maintenance as last read, one series per state (1: current).",
        [({"cloud": config.cloud, "state": s}, int(planned.state == s)) for s in MAINTENANCE_STATES])
    lines += textfile.gauge(
        "gpufleet_guard_maintenance_window_start_timestamp_seconds",
        "When each scheduled maintenance window starts.",
        [({"code": w.code, "event_id": w.event_id}, w.not_before) for w in planned.windows])
    lines += textfile.gauge(
        "gpufleet_guard_maintenance_unreadable_events",
        "Scheduled events the guard could not read (NaN: not read).",
        [({}, None if planned.state in (MAINTENANCE_OFF, maintenance.NOT_READ) else len(planned.problems))])
    idle = result.get("idle")
    if idle is not None:
        lines += textfile.gauge(
            "gpufleet_guard_idle_seconds",
            "How long every GPU has been below the threshold with nothing active.",
            [({}, float(idle.idle_seconds))])
        lines += textfile.gauge(
            "gpufleet_guard_idle_armed",
            "1 once the GPUs were busy or the grace period passed.",
            [({}, int(idle.armed))])
        lines += textfile.gauge(
            "gpufleet_guard_idle_window_seconds",
            "The idle window after which the guard acts.",
            [({}, float(config.idle.window_seconds))])
    budget = result["budget"]
    lines += textfile.gauge(
        "gpufleet_guard_budget_state",
        "The spend against its caps, one series per state (1: current).",
        [({"state": s}, int(budget.state == s)) for s in BUDGET_STATES])
    lines += textfile.gauge(
        "gpufleet_guard_spend",
        "Hourly price times running time, in the price's currency (NaN: unknown).",
        [({"scope": "node"}, budget.spend), ({"scope": "job"}, budget.job_spend)])
    lines += textfile.gauge(
        "gpufleet_guard_price_per_hour",
        "The hourly price the spend counts with (NaN: no price known).",
        [({}, config.budget.price_per_hour)])
    lines += textfile.gauge(
        "gpufleet_guard_spend_cap",
        "The spend cap (NaN: none).",
        [({"scope": "node"}, config.budget.node_cap), ({"scope": "job"}, config.budget.job_cap)])
    lines += textfile.gauge(
        "gpufleet_guard_spend_alarm_ratio",
        "The share of a cap at which the spend alarm fires.",
        [({}, config.budget.alarm_ratio)])
    last = max(events.values(), key=lambda record: record.get("seen_at", 0), default=None)
    if last is not None:
        final = last.get("final", {})
        lines += textfile.gauge(
            "gpufleet_guard_last_event_timestamp_seconds",
            "When the guard last acted, by reason and final action.",
            [({"reason": last["reason"], "action": final.get("action", "pending")}, float(last["seen_at"]))])
        # Whether the final action (stop, poweroff) went through: 0 is a
        # node still running, and billed, after the guard gave up.
        done = final.get("ok") if final.get("action") in ("stop", "poweroff") else None
        lines += textfile.gauge(
            "gpufleet_guard_final_action_ok",
            "1 if the last event's stop or poweroff went through, 0 if it failed, NaN if none or pending.",
            [({"reason": last["reason"], "action": final.get("action", "pending")},
              None if done is None else int(done))])
        landed = last.get("hook", {}).get("landed")
        lines += textfile.gauge(
            "gpufleet_guard_checkpoint_landed",
            "1 if the last event's checkpoint landed before its deadline, 0 if not, NaN if unknown or pending.",
            [({"reason": last["reason"]}, None if landed is None else int(landed))])
    lines += repair_metrics(config, result, repairs)
    lines += textfile.gauge(
        "gpufleet_guard_last_poll_timestamp_seconds",
        "When the guard last polled.",
        [({}, float(result["at"]))])
    textfile.write_atomic(os.path.join(config.textfile_dir, "gpufleet_guard.prom"), "\n".join(lines) + "\n",
                          make_dirs=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpufleet-guard", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=CONFIG_PATH)
    parser.add_argument("--once", action="store_true", help="poll once, print the result as JSON, and exit")
    args = parser.parse_args(argv)
    try:
        guard = Guard(load_config(args.config))
    except ConfigError as error:
        print(f"gpufleet-guard: {error}", file=sys.stderr)
        return 2
    if args.once:
        result = guard.poll()
        print(json.dumps(result, default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o) else str(o),
                         indent=1, sort_keys=True))
        return 0
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping:
        started = time.monotonic()
        guard.poll()
        time.sleep(max(guard.config.poll_seconds - (time.monotonic() - started), 0.1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
