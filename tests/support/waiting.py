"""Waiting on a condition with a deadline, for the tests that drive real
nodes (the Molecule scenarios and the lab tests): they must pass on a busy
machine, so they wait for what they need, never for a fixed time."""

from __future__ import annotations

import time


def wait_for(check, what: str, seconds: float = 60.0, every: float = 0.5):
    """Call `check` until it returns something true, and return that; fail
    naming `what` once `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {seconds:.0f} s")
        time.sleep(every)
