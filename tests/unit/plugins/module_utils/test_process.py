"""The node-side library's program runner and retry (_process.py, on a node
gpufleet_process.py): a run never raises, and says why it has no exit
status; a retry stops at the first outcome not worth another try."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _process


def test_a_finished_run_gives_its_status_and_both_streams():
    done = _process.run([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                        10)
    assert (done.rc, done.stdout, done.stderr, done.failure, done.why) == (3, "out\n", "err\n", "", "")


@pytest.mark.parametrize(("argv", "failure", "why"), [
    (["/nonexistent/nvidia-smi"], _process.MISSING, "/nonexistent/nvidia-smi not found"),
    ([sys.executable, "-c", "import time; time.sleep(30)"], _process.TIMEOUT, "timed out: it did not finish within 1s"),
    (["/etc/hostname"], _process.ERROR, "/etc/hostname could not run: "),
])
def test_a_run_without_a_status_says_why_and_never_raises(argv, failure, why):
    done = _process.run(argv, 1)
    assert done.rc is None and done.failure == failure and why in done.why, done
    assert (done.stdout, done.stderr) == ("", "")


def test_the_runner_stands_in_for_subprocess_and_gets_the_extra_arguments():
    seen = {}

    def runner(argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return subprocess.CompletedProcess(argv, 0, None, None)

    done = _process.run(("systemctl", "is-active", "x"), 5, runner=runner, env={"A": "1"})
    assert done == _process.Ran(0, "", "")
    assert seen == {"argv": ["systemctl", "is-active", "x"], "capture_output": True, "text": True, "timeout": 5,
                    "check": False, "env": {"A": "1"}}


def test_retry_backs_off_by_its_factor_and_stops_at_the_first_good_outcome():
    answers = iter([1, 1, 1, 0, 1])
    slept, told = [], []
    outcomes = _process.retry(lambda: next(answers), lambda rc: rc != 0, 6, 2.0, factor=2, sleep=slept.append,
                              log=lambda n, o, w: told.append((n, o, w)))
    assert outcomes == [1, 1, 1, 0]
    assert slept == [2.0, 4.0, 8.0]
    assert told == [(1, 1, 2.0), (2, 1, 4.0), (3, 1, 8.0)]


def test_retry_gives_up_after_its_attempts_without_a_last_wait():
    slept = []
    outcomes = _process.retry(lambda: "unreachable", lambda o: True, 3, 5.0, sleep=slept.append)
    assert outcomes == ["unreachable"] * 3 and slept == [5.0, 5.0]


def test_an_outcome_not_worth_another_try_ends_at_once():
    slept = []
    assert _process.retry(lambda: "refused", lambda o: o == "unreachable", 5, 1.0, sleep=slept.append) == ["refused"]
    assert slept == []


def test_an_exception_from_the_call_ends_the_retries():
    def call():
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        _process.retry(call, lambda o: True, 3, 0.0, sleep=lambda s: None)


def test_retry_needs_one_attempt_at_least():
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        _process.retry(lambda: 0, lambda o: False, 0, 1.0)
