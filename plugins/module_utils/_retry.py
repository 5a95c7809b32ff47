# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retrying throttled cloud API calls with jittered exponential backoff.

Private to gpufleet.cloud. Every adapter turns its SDK's own retries off
and calls through ``call_with_retry`` instead, so all four clouds back off
the same way and a test can see (and fake) every sleep.
"""

from __future__ import annotations

import random
import time


class RetryPolicy:
    """How many times to try a throttled call, and how long to wait between.

    ``attempts`` counts the first call. The wait before retry ``n`` (from 1)
    is drawn uniformly from [0, min(max_delay, base_delay * 2 ** (n - 1))]:
    "full jitter", which spreads a burst of throttled workers (one per
    region) over time instead of having them retry in lockstep.
    """

    def __init__(self, attempts=5, base_delay=0.5, max_delay=20.0, sleep=time.sleep, rand=random.random):
        if attempts < 1:
            raise ValueError("attempts must be at least 1, got %r" % (attempts,))
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.rand = rand

    def delay(self, retry):
        """The wait in seconds before retry number ``retry`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return self.rand() * ceiling


class ThrottledError(Exception):
    """A call was still throttled after every attempt the policy allows."""

    def __init__(self, attempts, last_error):
        super().__init__("still throttled after %d attempts: %s" % (attempts, last_error))
        self.attempts = attempts
        self.last_error = last_error


def call_with_retry(call, is_throttled, policy):
    """``call()``, retried while ``is_throttled(exception)`` says so.

    Any other exception propagates at once: only throttling is worth
    waiting for; an auth or parameter error will not get better.
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            return call()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad on purpose: each SDK has its own exception classes, and
            # the cloud's classifier below decides what is throttling.
            if not is_throttled(exc):
                raise
            if attempt == policy.attempts:
                raise ThrottledError(attempt, exc) from exc
            policy.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
