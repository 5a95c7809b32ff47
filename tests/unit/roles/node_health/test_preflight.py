"""node_health's own preflight checks where two options together decide:
an NCCL test on the timer that may outlast the timer's interval."""

from __future__ import annotations

import pytest

from tests.unit.roles.preflight_checks import evaluate

ON_TIMER = {"node_health_nccl_enabled": True, "node_health_nccl_runs_on_timer": True, "node_health_nccl_min_busbw_gbps": 100}


@pytest.mark.parametrize("timeout, interval, warned", [
    (900, 15, True),   # the defaults, once the test runs on the timer: 900 s is not shorter than 15 min
    (600, 15, False),
    (3600, 30, True),
])
def test_an_nccl_test_that_may_outlast_the_interval_is_warned_about(timeout, interval, warned):
    refused, warnings = evaluate("node_health", {**ON_TIMER, "node_health_nccl_timeout_seconds": timeout,
                                                 "node_health_interval_minutes": interval})
    assert refused == []
    assert bool(warnings) == warned, warnings
    if warned:
        assert warnings[0].startswith(f"node_health_nccl_timeout_seconds ({timeout} s) is not shorter than "
                                      f"node_health_interval_minutes ({interval} min)")
        assert "for example" in warnings[0]


def test_off_the_timer_the_timeout_is_the_runs_own():
    assert evaluate("node_health", {"node_health_nccl_enabled": True, "node_health_nccl_min_busbw_gbps": 100,
                                    "node_health_nccl_timeout_seconds": 3600}) == ([], [])
