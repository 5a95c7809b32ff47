"""The guard's idle and budget decisions: arming, windows, and unknown
(utilisation or activity that cannot be read), which must count as active,
never as idle; spend, caps and the alarm before them."""

from __future__ import annotations

import random

import pytest

from ...conftest import load_helper

triggers = load_helper("guard", "gpufleet_guard_triggers.py", "gpufleet_guard_triggers")

CONFIG = triggers.IdleConfig(threshold_percent=10, window_seconds=600, grace_seconds=1800)
QUIET = {"job unit train.service": False, "SSH sessions": False, "activity file": False}


def run(polls, state=None, config=CONFIG, started_at=0.0):
    """polls: (now, utilization, sources) in order; the verdicts."""
    state = state or triggers.IdleState()
    return [triggers.step_idle(config, state, util, sources, now, started_at) for now, util, sources in polls]


def test_busy_gpus_arm_and_then_a_full_quiet_window_triggers():
    verdicts = run([(0, [95, 90], QUIET), (60, [3, 0], QUIET), (659, [3, 0], QUIET), (660, [3, 0], QUIET)])
    assert [v.armed for v in verdicts] == [True] * 4
    assert [v.idle_seconds for v in verdicts] == [0, 0, 599, 600]
    assert [v.triggered for v in verdicts] == [False, False, False, True]


def test_never_busy_counts_only_after_the_grace_period():
    polls = [(t, [0.0], QUIET) for t in range(0, 1800 + 600 + 1, 60)]
    verdicts = run(polls)
    assert not any(v.triggered for v in verdicts if v.idle_seconds < 600)
    first_armed = next(i for i, v in enumerate(verdicts) if v.armed)
    assert polls[first_armed][0] == 1800  # the grace period, not before
    assert verdicts[-1].triggered and polls[-1][0] == 2400
    assert "not armed" in verdicts[0].reason


@pytest.mark.parametrize("utilization", [None, [], [None], [2.0, None]])
def test_utilization_that_cannot_be_read_never_lets_idle_time_run(utilization):
    state = triggers.IdleState(armed=True)
    verdicts = run([(t, utilization, QUIET) for t in range(0, 7200, 60)], state)
    assert not any(v.triggered or v.idle_seconds for v in verdicts)
    assert "unknown" in verdicts[-1].reason


@pytest.mark.parametrize("source", sorted(QUIET))
@pytest.mark.parametrize("activity", [True, None])
def test_an_active_or_unreadable_source_keeps_the_node_busy(source, activity):
    sources = dict(QUIET, **{source: activity})
    verdicts = run([(t, [0.0], sources) for t in range(0, 7200, 60)], triggers.IdleState(armed=True))
    assert not any(v.triggered or v.idle_seconds for v in verdicts)
    assert source in verdicts[-1].reason


def test_activity_inside_the_window_restarts_it():
    polls = [(0, [0.0], QUIET), (500, [0.0], QUIET), (550, [0.0], dict(QUIET, **{"SSH sessions": True})),
             (600, [0.0], QUIET), (1199, [0.0], QUIET), (1200, [0.0], QUIET)]
    verdicts = run(polls, triggers.IdleState(armed=True))
    assert [v.idle_seconds for v in verdicts] == [0, 500, 0, 0, 599, 600]
    assert [v.triggered for v in verdicts] == [False] * 5 + [True]


def test_the_threshold_itself_is_busy():
    verdicts = run([(0, [10.0, 0.0], QUIET), (700, [9.9, 0.0], QUIET), (1300, [9.9, 0.0], QUIET)])
    assert verdicts[0].armed and verdicts[0].idle_seconds == 0
    assert verdicts[2].triggered


def test_a_clock_that_goes_back_restarts_the_count():
    verdicts = run([(1000, [0.0], QUIET), (1500, [0.0], QUIET), (200, [0.0], QUIET), (700, [0.0], QUIET)],
                   triggers.IdleState(armed=True))
    assert [v.idle_seconds for v in verdicts] == [0, 500, 0, 500]
    assert not any(v.triggered for v in verdicts)


def test_a_messy_day_never_triggers_while_an_unknown_falls_in_every_window():
    # A day of 5 s polls on an 8-GPU node, mostly quiet, with an unreadable
    # poll (nvidia-smi failing, or an activity source) at least once every
    # window: idle time must never reach the window.
    rng = random.Random(20261203)
    state, polls, next_unknown = triggers.IdleState(armed=True), [], 0
    for now in range(0, 86400, 5):
        util = [rng.choice([0.0, 0.5, 3.0, 9.0]) for _gpu in range(8)]
        sources = dict(QUIET)
        if now >= next_unknown:
            if rng.random() < 0.5:
                util = rng.choice([None, [], util[:4] + [None] + util[5:]])
            else:
                sources[rng.choice(sorted(QUIET))] = None
            next_unknown = now + rng.randrange(60, 600)
        polls.append((now, util, sources))
    verdicts = run(polls, state)
    assert not any(v.triggered for v in verdicts)
    assert max(v.idle_seconds for v in verdicts) < 600


def test_meter_sums_the_boots_and_is_not_fooled_by_a_repeated_boot():
    meter = triggers.Meter()
    assert meter.update("boot-a", 100) == 100
    assert meter.update("boot-a", 3600) == 3600
    assert meter.update("boot-b", 10) == 3610  # a stop and start: the first boot's hour counts
    assert meter.update("boot-b", 70) == 3670
    assert meter.update("boot-b", -5) == 3600  # an unreadable uptime is not negative time


def test_no_price_is_unknown_and_never_a_cap():
    verdict = triggers.budget(triggers.BudgetConfig(None, node_cap=1.0, job_cap=1.0), 10**7, 10**7)
    assert (verdict.state, verdict.spend) == (triggers.UNKNOWN, None)
    assert "unknown" in verdict.reason


@pytest.mark.parametrize(
    ("seconds", "job_seconds", "state"),
    [(3600, None, "ok"), (8 * 3600, None, "alarm"), (10 * 3600, None, "cap"), (11 * 3600, None, "cap"),
     (3600, 3600, "ok"), (3600, 1.6 * 3600, "alarm"), (9 * 3600, 2 * 3600, "cap")],
)
def test_spend_against_the_node_and_job_caps(seconds, job_seconds, state):
    config = triggers.BudgetConfig(price_per_hour=2.5, node_cap=25.0, job_cap=5.0, alarm_ratio=0.8)
    verdict = triggers.budget(config, seconds, job_seconds)
    assert verdict.state == state, verdict
    assert verdict.spend == pytest.approx(2.5 * seconds / 3600)


def test_the_cap_reason_names_which_cap():
    config = triggers.BudgetConfig(price_per_hour=4.0, node_cap=100.0, job_cap=2.0)
    assert "job's spend 2.00 reached its cap 2.00" in triggers.budget(config, 1800, 1800).reason
    assert triggers.budget(triggers.BudgetConfig(price_per_hour=4.0), 10**6, 10**6).state == "ok"
