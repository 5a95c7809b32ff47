# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The guard's idle and budget triggers: decisions on what the daemon
observed, with no I/O of their own, so every rule is tested without a node.

Idle: every GPU below a utilisation threshold for a window, while no
activity source (a job unit, an SSH session, a file the job touches) is
active. Idle time counts only once the guard is armed: after the GPUs were
busy once, or after a start-up grace period, so a job still loading data or
compiling is not stopped. Unknown counts as active: no utilisation figure
(nvidia-smi missing or failing, no GPU listed) or a source that cannot be
read never lets idle time run.

Budget: spend is the hourly price times the time the instance ran, summed
over its boots (a stopped instance is not billed for compute). No price
means the spend is unknown, which never triggers and is reported as such.
"""

from __future__ import annotations

import dataclasses

OK, ALARM, CAP, UNKNOWN = "ok", "alarm", "cap", "unknown"


@dataclasses.dataclass(frozen=True)
class IdleConfig:
    threshold_percent: float
    window_seconds: float
    grace_seconds: float


@dataclasses.dataclass
class IdleState:
    """Kept on disk between polls and across restarts of the daemon."""

    armed: bool = False
    idle_since: float | None = None


@dataclasses.dataclass(frozen=True)
class IdleVerdict:
    idle_seconds: float
    armed: bool
    triggered: bool
    reason: str


def step_idle(config: IdleConfig, state: IdleState, utilization, sources: dict, now: float,
              started_at: float) -> IdleVerdict:
    """One poll. ``utilization``: one percentage per GPU, or None when it
    could not be read; ``sources``: name -> True (active), False (not
    active) or None (could not be read). Updates ``state``."""
    if utilization is None or len(utilization) == 0:
        return _active(state, "GPU utilisation unknown, which counts as active")
    if any(u is None for u in utilization):
        return _active(state, "a GPU's utilisation is unknown, which counts as active")
    busy = [i for i, u in enumerate(utilization) if u >= config.threshold_percent]
    if busy:
        state.armed = True
        return _active(state, f"GPU {busy[0]} at {utilization[busy[0]]:g} % (threshold {config.threshold_percent:g} %)")
    if not state.armed and now - started_at >= config.grace_seconds:
        state.armed = True
    unknown = sorted(name for name, active in sources.items() if active is None)
    if unknown:
        return _active(state, f"activity of {', '.join(unknown)} unknown, which counts as active")
    active = sorted(name for name, is_active in sources.items() if is_active)
    if active:
        return _active(state, f"{', '.join(active)} active")
    if not state.armed:
        return _active(state, "not armed: the GPUs were never busy and the grace period has not passed")
    # A clock that went back restarts the count rather than inventing idle time.
    if state.idle_since is None or state.idle_since > now:
        state.idle_since = now
    idle = now - state.idle_since
    return IdleVerdict(idle, True, idle >= config.window_seconds,
                       f"every GPU below {config.threshold_percent:g} % and nothing active for {idle:.0f} s")


def _active(state: IdleState, reason: str) -> IdleVerdict:
    state.idle_since = None
    return IdleVerdict(0.0, state.armed, False, reason)


@dataclasses.dataclass
class Meter:
    """The instance's running time across boots, kept on disk: the seconds
    of earlier boots, plus the current boot's uptime."""

    boot_id: str = ""
    earlier_boots_seconds: float = 0.0
    last_uptime: float = 0.0

    def update(self, boot_id: str, uptime: float) -> float:
        if boot_id != self.boot_id:
            if self.boot_id:
                self.earlier_boots_seconds += self.last_uptime
            self.boot_id = boot_id
        self.last_uptime = max(uptime, 0.0)
        return self.earlier_boots_seconds + self.last_uptime


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    price_per_hour: float | None
    node_cap: float | None = None
    job_cap: float | None = None
    alarm_ratio: float = 0.8


@dataclasses.dataclass(frozen=True)
class BudgetVerdict:
    state: str
    spend: float | None
    job_spend: float | None
    reason: str


def budget(config: BudgetConfig, running_seconds: float, job_seconds: float | None) -> BudgetVerdict:
    """The spend against the caps. ``job_seconds``: how long the job has run,
    None when no job runs or its start cannot be read (its cap is then not
    checked; the node's still is)."""
    if config.price_per_hour is None:
        return BudgetVerdict(UNKNOWN, None, None, "no hourly price for this instance: the spend is unknown")
    spend = config.price_per_hour * running_seconds / 3600.0
    job_spend = None if job_seconds is None else config.price_per_hour * job_seconds / 3600.0
    checks = [("node", spend, config.node_cap), ("job", job_spend, config.job_cap)]
    checks = [(what, value, cap) for what, value, cap in checks if value is not None and cap is not None]
    for what, value, cap in checks:
        if value >= cap:
            return BudgetVerdict(CAP, spend, job_spend, f"the {what}'s spend {value:.2f} reached its cap {cap:.2f}")
    for what, value, cap in checks:
        if value >= config.alarm_ratio * cap:
            return BudgetVerdict(ALARM, spend, job_spend,
                                 f"the {what}'s spend {value:.2f} is past {config.alarm_ratio:.0%} of its cap {cap:.2f}")
    return BudgetVerdict(OK, spend, job_spend, "below the caps")
