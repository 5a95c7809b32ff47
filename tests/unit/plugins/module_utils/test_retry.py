"""Jittered exponential backoff for throttled calls."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils._retry import RetryPolicy, ThrottledError, call_with_retry


class Throttled(Exception):
    pass


def flaky(failures, exc=Throttled):
    """A call that raises ``exc`` ``failures`` times, then answers."""
    calls = []

    def call():
        calls.append(1)
        if len(calls) <= failures:
            raise exc("slow down")
        return "answer"
    return call, calls


def test_throttled_calls_are_retried_until_they_answer():
    sleeps = []
    call, calls = flaky(3)
    policy = RetryPolicy(attempts=5, base_delay=0.5, max_delay=20, sleep=sleeps.append, rand=lambda: 1.0)
    assert call_with_retry(call, lambda e: isinstance(e, Throttled), policy) == "answer"
    assert len(calls) == 4
    # With the jitter at its top, the ceilings double: 0.5, 1, 2.
    assert sleeps == [0.5, 1.0, 2.0]


def test_backoff_is_jittered_and_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, rand=lambda: 0.25)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 1.25, 1.25]
    zero = RetryPolicy(rand=lambda: 0.0)
    assert zero.delay(3) == 0.0


def test_other_errors_are_not_retried():
    sleeps = []
    call, calls = flaky(1, exc=KeyError)
    with pytest.raises(KeyError):
        call_with_retry(call, lambda e: isinstance(e, Throttled), RetryPolicy(sleep=sleeps.append))
    assert len(calls) == 1 and sleeps == []


def test_giving_up_says_how_often_it_tried():
    call, calls = flaky(10)
    with pytest.raises(ThrottledError, match="still throttled after 3 attempts") as info:
        call_with_retry(call, lambda e: isinstance(e, Throttled), RetryPolicy(attempts=3, sleep=lambda s: None))
    assert len(calls) == 3
    assert isinstance(info.value.last_error, Throttled)


def test_a_policy_needs_at_least_one_attempt():
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
