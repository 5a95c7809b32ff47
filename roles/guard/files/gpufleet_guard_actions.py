# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The guard's action pipeline, run once per event (a spot notice, GPUs
idle for the window, a spend cap reached):

1. write the marker file, JSON with the reason and the deadline, for jobs
   that look for a flag between steps;
2. send the configured signal to the job's units and containers;
3. run the checkpoint hook, if any, within the time left; after SIGTERM or
   SIGINT, once the job has ended (it saves its checkpoint on the way out),
   or after half the time left if it has not;
4. record whether the checkpoint landed before the deadline;
5. take the final action: nothing (the default), the cloud's stop call
   (a command: gpufleet_guard_stop.py, or the user's own; retried with
   backoff while it fails, but not after exit status 2, which says that
   trying again cannot help), or poweroff. An event may carry its own:
   a scheduled maintenance's is none, as the cloud carries it out; a
   repair's is none, as the repair ladder's rungs follow it.

Every step is recorded in the daemon's state, which the caller saves to
disk after each one: an event seen again (the same notice on the next
poll, or after a restart of the daemon) resumes after its last recorded
step and never repeats one. A hook that was running when the daemon
stopped is recorded as interrupted, not run again. The standard library
and the node-side library only.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import subprocess
import time

import gpufleet_process as process
import gpufleet_textfile as textfile

FINAL_ACTIONS = ("none", "stop", "poweroff")
# A stop command's exit status for a refusal that another try cannot cure
# (credentials, permissions, an unknown instance): gpufleet_guard_stop.py's.
STOP_REFUSED = 2
# The signals after which a job ends (SIGUSR1 and SIGUSR2 ask it to save
# and go on): the hook waits for the job to end after these.
STOPPING_SIGNALS = ("SIGTERM", "SIGINT")
STEPS = ("marker", "signal", "hook", "final")
# Why an event whose own final action is none has none.
OWN_FINAL = {"maintenance": "the maintenance is the cloud's own final action",
             "repair": "the repair ladder takes its rungs after the checkpoint"}


@dataclasses.dataclass(frozen=True)
class Event:
    event_id: str
    reason: str  # spot, maintenance, idle, budget, repair
    detail: str
    deadline: float  # seconds since the epoch
    # This event's own final action over the configured one: a scheduled
    # maintenance is the cloud's to carry out ("none").
    final_action: str | None = None


@dataclasses.dataclass(frozen=True)
class ActionConfig:
    marker_path: str
    signal: str = "SIGTERM"
    job_units: tuple[str, ...] = ()
    job_containers: tuple[str, ...] = ()
    hook: tuple[str, ...] = ()
    hook_margin_seconds: float = 10.0
    final_action: str = "none"
    stop_command: tuple[str, ...] = ()
    stop_attempts: int = 5
    stop_backoff_seconds: float = 2.0

    def __post_init__(self):
        if self.final_action not in FINAL_ACTIONS:
            raise ValueError(f"final_action must be one of {', '.join(FINAL_ACTIONS)}, not {self.final_action!r}")
        if self.final_action == "stop" and not self.stop_command:
            raise ValueError("final_action stop needs the stop_command that calls the cloud's stop API")
        if self.signal not in ("SIGTERM", "SIGUSR1", "SIGINT", "SIGUSR2"):
            raise ValueError(f"signal must be SIGTERM, SIGUSR1, SIGUSR2 or SIGINT, not {self.signal!r}")


def iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def command(argv, timeout: float | None, run=subprocess.run) -> tuple[int | None, str, str]:
    """(exit status, stdout, what it said: stderr, else stdout, its last
    500 characters); None and why where it could not run or timed out."""
    done = process.run(list(argv), timeout, runner=run)
    if done.rc is None:
        return None, "", done.why
    return done.rc, done.stdout, (done.stderr or done.stdout).strip()[-500:]


def write_marker(path: str, event: Event, now: float) -> None:
    """Atomically, readable by all (jobs run as their own users): a job
    polling the file sees no marker or a whole one."""
    body = {"event_id": event.event_id, "reason": event.reason, "detail": event.detail,
            "deadline": event.deadline, "deadline_utc": iso(event.deadline), "written_at": now}
    textfile.write_atomic(path, json.dumps(body, indent=2, sort_keys=True) + "\n", make_dirs=True)


class Pipeline:
    """Runs an event's steps against ``events`` (event id -> record, part of
    the daemon's state); ``save()`` persists that state after each step."""

    def __init__(self, config: ActionConfig, events: dict, save, run=subprocess.run, clock=time.time,
                 sleep=time.sleep):
        self.config = config
        self.events = events
        self.save = save
        self.run = run
        self.clock = clock
        self.sleep = sleep

    def handle(self, event: Event) -> dict:
        record = self.events.setdefault(event.event_id, {
            "reason": event.reason, "detail": event.detail, "deadline": event.deadline, "seen_at": self.clock()})
        for step in STEPS:
            if step in record:
                continue
            if step == "hook" and "hook_started" in record:
                record["hook"] = {"landed": False, "rc": None,
                                  "detail": "the guard stopped while the hook ran; not run again"}
            else:
                record[step] = getattr(self, "_" + step)(event, record)
            self.save()
        return record

    def _marker(self, event: Event, _record: dict) -> dict:
        write_marker(self.config.marker_path, event, self.clock())
        return {"path": self.config.marker_path, "at": self.clock()}

    def _command(self, argv, timeout: float | None = None) -> tuple[int | None, str]:
        rc, _stdout, detail = command(argv, timeout, self.run)
        return rc, detail

    def _state(self, argv, success_only: bool = False) -> str | None:
        """What a state query prints on stdout (a warning on stderr is not
        the state); None where it could not run, or, with `success_only`,
        where it failed."""
        done = process.run(argv, 10, runner=self.run)
        if done.rc is None or (success_only and done.rc != 0):
            return None
        return done.stdout.strip()

    def _to_job(self, unit_argv: list[str], container_argv: list[str], timeout: float) -> dict:
        """One command per job unit (``unit_argv`` + the unit) and per job
        container (``container_argv`` + the container): each one's outcome."""
        done = {}
        for kind, argv, names in (("unit", unit_argv, self.config.job_units),
                                  ("container", container_argv, self.config.job_containers)):
            for name in names:
                rc, out = self._command([*argv, name], timeout)
                done[f"{kind}:{name}"] = {"rc": rc, "detail": out}
        return done

    def _signal(self, _event: Event, _record: dict) -> dict:
        sent = self._to_job(["systemctl", "kill", f"--signal={self.config.signal}", "--kill-whom=main"],
                            ["docker", "kill", f"--signal={self.config.signal}"], 30)
        return {"signal": self.config.signal, "targets": sent, "at": self.clock()}

    def _hook(self, event: Event, record: dict) -> dict:
        if not self.config.hook:
            # No hook: whether the job's own checkpoint landed is not known here.
            return {"landed": None, "rc": None, "detail": "no checkpoint hook configured"}
        left = event.deadline - self.clock() - self.config.hook_margin_seconds
        if left <= 0:
            return {"landed": False, "rc": None, "detail": "no time left before the deadline; the hook did not run"}
        # A job told to stop saves its checkpoint on the way out: the hook
        # must copy that one, not the one before. It waits for the job to
        # end, for half the time left at most, so a job that hangs still
        # leaves the hook time to copy its last checkpoint.
        job = self._wait_for_job(left / 2) if self.config.signal in STOPPING_SIGNALS else None
        left = event.deadline - self.clock() - self.config.hook_margin_seconds
        record["hook_started"] = self.clock()
        self.save()
        rc, out = self._command(self.config.hook, left)
        finished = self.clock()
        landed = rc == 0 and finished <= event.deadline
        result = {"landed": landed, "rc": rc, "detail": out, "finished_at": finished}
        if job is not None:
            result["job"] = job
        return result

    def stop_job(self) -> dict:
        """Stop the job's units and containers (the repair ladder's first
        rung, after its checkpoint): whether every one stopped."""
        stopped = self._to_job(["systemctl", "stop"], ["docker", "stop"], 120)
        if not stopped:
            return {"ok": None, "detail": "no job units or containers configured (guard_job_units, guard_job_containers)"}
        return {"ok": all(target["rc"] == 0 for target in stopped.values()), "targets": stopped}

    def _running(self) -> list[str]:
        """The job's units and containers that still run. One whose state
        cannot be read counts as running: the wait then ends at its limit,
        never early."""
        # By the state printed, not the exit status: is-active exits 3 for
        # "deactivating" too, while the job may still be saving.
        running = [f"unit:{unit}" for unit in self.config.job_units
                   if self._state(["systemctl", "is-active", unit]) not in ("inactive", "failed")]
        inspect = ["docker", "inspect", "--format", "{{.State.Running}}"]
        running += [f"container:{name}" for name in self.config.job_containers
                    if self._state(inspect + [name], success_only=True) != "false"]
        return running

    def _wait_for_job(self, limit: float) -> dict:
        started = self.clock()
        running = self._running()
        while running and self.clock() - started < limit:
            self.sleep(1.0)
            running = self._running()
        return {"stopped": not running, "still_running": running, "waited_seconds": round(self.clock() - started, 1)}

    def _final(self, event: Event, _record: dict) -> dict:
        if event.final_action == "none":
            return {"action": "none", "detail": OWN_FINAL.get(event.reason, f"the {event.reason} event has none")}
        action = self.config.final_action
        if action == "none":
            return {"action": "none", "detail": "notify only"}
        argv = ["systemctl", "poweroff"] if action == "poweroff" else list(self.config.stop_command)

        def stop():
            rc, out = self._command(argv, 120)
            return {"rc": rc, "detail": out, "at": self.clock()}

        # A refusal of the built-in stop (STOP_REFUSED) is not tried again.
        attempts = process.retry(
            stop, lambda a: a["rc"] != 0 and not (a["rc"] == STOP_REFUSED and action == "stop"),
            self.config.stop_attempts, self.config.stop_backoff_seconds, factor=2, sleep=self.sleep)
        return {"action": action, "ok": attempts[-1]["rc"] == 0, "attempts": attempts}
