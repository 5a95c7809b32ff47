# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Running programs from the nodes' own scripts: one subprocess call with a
time-out that never raises, and one retry with backoff.

_common's node_library step installs this file on the node as
gpufleet_process.py, beside the scripts of monitoring, node_health and the
guard; the _kms_client role ships it in its gpufleet_kms package. It uses
the standard library only.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

# Why a program gave no exit status.
MISSING = "missing"
TIMEOUT = "timeout"
ERROR = "error"


class Ran(NamedTuple):
    """A finished run: ``rc`` is its exit status, or None where it did not
    run or did not finish, and then ``failure`` (MISSING, TIMEOUT or ERROR)
    and ``why`` say so."""

    rc: Optional[int]
    stdout: str = ""
    stderr: str = ""
    failure: str = ""
    why: str = ""


def run(argv: Sequence[str], timeout: Optional[float], runner: Callable[..., Any] = subprocess.run,
        **kwargs: Any) -> Ran:
    """``argv`` with its output captured as text, stopped after ``timeout``
    seconds (None: no limit). ``runner`` stands in for subprocess.run in
    tests; ``kwargs`` go to it (env, input)."""
    name = argv[0] if argv else "(nothing)"
    try:
        done = runner(list(argv), capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    except FileNotFoundError:
        return Ran(None, failure=MISSING, why="%s not found" % name)
    except subprocess.TimeoutExpired:
        return Ran(None, failure=TIMEOUT, why="%s timed out: it did not finish within %.0fs" % (name, timeout or 0))
    except OSError as exc:  # not executable, for one
        return Ran(None, failure=ERROR, why="%s could not run: %s" % (name, exc))
    return Ran(done.returncode, done.stdout or "", done.stderr or "")


def retry(call: Callable[[], Any], again: Callable[[Any], bool], attempts: int, delay: float,
          factor: float = 1.0, sleep: Callable[[float], Any] = time.sleep,
          log: Optional[Callable[[int, Any, float], Any]] = None) -> list:
    """``call()`` until ``again(outcome)`` is false or ``attempts`` calls
    were made, waiting ``delay`` seconds before the second call and
    ``factor`` times longer before each later one. Returns every outcome,
    the last one last; ``log(attempt, outcome, wait)`` hears of each retry.
    A call that can fail in a way worth another try returns that failure
    (an exception it catches, an exit status): anything it raises ends the
    retries at once."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1, got %r" % (attempts,))
    outcomes = []
    wait = delay
    for attempt in range(1, attempts + 1):
        outcome = call()
        outcomes.append(outcome)
        if attempt == attempts or not again(outcome):
            break
        if log:
            log(attempt, outcome, wait)
        sleep(wait)
        wait *= factor
    return outcomes
