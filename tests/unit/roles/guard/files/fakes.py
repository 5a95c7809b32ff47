"""Stand-ins the guard's tests share."""

from __future__ import annotations


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
