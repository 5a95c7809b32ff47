"""The guard's action pipeline: marker, signal, checkpoint hook, whether
the checkpoint landed, final action; once per event, resumed after a
restart of the daemon without repeating a step."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ...conftest import load_helper
from .fakes import Clock

actions = load_helper("guard", "gpufleet_guard_actions.py", "gpufleet_guard_actions")


class Runner:
    """Stands in for subprocess.run: records argv, answers by the first
    word, and can take time on the clock (a hook that runs long)."""

    def __init__(self, clock, answers=None, takes=0.0):
        self.clock, self.answers, self.takes, self.calls = clock, answers or {}, takes, []

    def __call__(self, argv, **kwargs):
        self.calls.append((argv, kwargs.get("timeout")))
        answer = self.answers.get(argv[0], 0)
        if isinstance(answer, list):
            answer = answer.pop(0)
        if answer == "timeout":
            raise subprocess.TimeoutExpired(argv, kwargs.get("timeout"))
        self.clock.now += self.takes if argv[0] == "/usr/local/bin/checkpoint" else 0
        return subprocess.CompletedProcess(argv, answer, "", "" if answer == 0 else "refused")


def pipeline(tmp_path, clock, runner, events=None, saves=None, **config):
    config = {"marker_path": str(tmp_path / "run" / "event.json"), **config}
    events = {} if events is None else events
    saves = [] if saves is None else saves
    return actions.Pipeline(actions.ActionConfig(**config), events,
                            lambda: saves.append(json.loads(json.dumps(events))), run=runner, clock=clock,
                            sleep=lambda s: runner.calls.append((["sleep"], s))), events, saves


def event(clock, lead=120.0, event_id="aws-terminate-1"):
    return actions.Event(event_id, "spot", "terminate at 04:05:33Z", clock.now + lead)


def test_the_whole_pipeline_in_order(tmp_path):
    clock = Clock()
    runner = Runner(clock, takes=30)
    pipe, events, saves = pipeline(tmp_path, clock, runner, job_units=("train.service",), job_containers=("trainer",),
                                   signal="SIGUSR1", hook=("/usr/local/bin/checkpoint",))
    start = clock.now
    record = pipe.handle(event(clock))
    marker = json.loads((tmp_path / "run" / "event.json").read_text())
    assert marker["reason"] == "spot" and marker["deadline"] == start + 120
    assert marker["deadline_utc"].endswith("Z") and marker["event_id"] == "aws-terminate-1"
    assert [argv for argv, _t in runner.calls] == [
        ["systemctl", "kill", "--signal=SIGUSR1", "--kill-whom=main", "train.service"],
        ["docker", "kill", "--signal=SIGUSR1", "trainer"],
        ["/usr/local/bin/checkpoint"],
    ]
    # The hook gets the time left before the deadline, less the margin.
    assert runner.calls[2][1] == pytest.approx(110.0)
    assert record["hook"]["landed"] is True
    assert record["final"] == {"action": "none", "detail": "notify only"}
    # Saved after every step (and when the hook started).
    assert len(saves) == 5 and set(saves[-1]["aws-terminate-1"]) >= {"marker", "signal", "hook", "final"}


@pytest.mark.parametrize(("answer", "takes", "why"), [(0, 115, "after the deadline"), (3, 5, "failed"),
                                                      ("timeout", 0, "timed out")])
def test_a_checkpoint_that_fails_or_ends_late_did_not_land(tmp_path, answer, takes, why):
    clock = Clock()
    runner = Runner(clock, answers={"/usr/local/bin/checkpoint": answer}, takes=takes)
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, hook=("/usr/local/bin/checkpoint",),
                                     hook_margin_seconds=0)
    assert pipe.handle(event(clock, lead=110))["hook"]["landed"] is False, why


def test_no_time_left_skips_the_hook_and_says_so(tmp_path):
    clock = Clock()
    runner = Runner(clock)
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, hook=("/usr/local/bin/checkpoint",))
    record = pipe.handle(event(clock, lead=-30))  # a notice whose time has passed
    assert record["hook"] == {"landed": False, "rc": None, "detail": "no time left before the deadline; the hook did not run"}
    assert ["/usr/local/bin/checkpoint"] not in [argv for argv, _t in runner.calls]


def test_without_a_hook_whether_it_landed_is_unknown_not_true(tmp_path):
    clock = Clock()
    pipe, _events, _saves = pipeline(tmp_path, clock, Runner(clock))
    assert pipe.handle(event(clock))["hook"]["landed"] is None


def test_the_same_event_again_runs_nothing_again(tmp_path):
    clock = Clock()
    runner = Runner(clock)
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, job_units=("train.service",), final_action="poweroff")
    first = pipe.handle(event(clock))
    calls = list(runner.calls)
    clock.now += 5
    assert pipe.handle(event(clock)) == first
    assert runner.calls == calls == [
        (["systemctl", "kill", "--signal=SIGTERM", "--kill-whom=main", "train.service"], 30),
        (["systemctl", "poweroff"], 120),
    ]


def test_a_restarted_daemon_resumes_after_the_last_step_it_saved(tmp_path):
    clock = Clock()
    runner = Runner(clock)

    def crash(argv, **kwargs):
        if argv[0] == "docker":
            raise KeyboardInterrupt  # the daemon stops in the middle of the signal step
        return runner(argv, **kwargs)

    pipe, events, saves = pipeline(tmp_path, clock, crash, job_containers=("trainer",), final_action="poweroff")
    with pytest.raises(KeyboardInterrupt):
        pipe.handle(event(clock))
    on_disk = saves[-1]
    assert set(on_disk["aws-terminate-1"]) >= {"marker"} and "signal" not in on_disk["aws-terminate-1"]
    (tmp_path / "run" / "event.json").unlink()

    again = Runner(clock)
    pipe, events, _saves = pipeline(tmp_path, clock, again, events=on_disk, job_containers=("trainer",),
                                    final_action="poweroff")
    record = pipe.handle(event(clock))
    assert not (tmp_path / "run" / "event.json").exists(), "the marker step is not repeated"
    assert [argv[0] for argv, _t in again.calls] == ["docker", "systemctl"]
    assert record["final"]["ok"] is True


def test_a_hook_cut_off_by_a_restart_is_not_run_again(tmp_path):
    clock = Clock()
    events = {"aws-terminate-1": {"reason": "spot", "marker": {}, "signal": {}, "hook_started": clock.now - 20}}
    runner = Runner(clock)
    pipe, events, _saves = pipeline(tmp_path, clock, runner, events=events, hook=("/usr/local/bin/checkpoint",))
    record = pipe.handle(event(clock))
    assert record["hook"]["landed"] is False and "not run again" in record["hook"]["detail"]
    assert runner.calls == []


def test_the_stop_call_retries_with_backoff_until_it_succeeds(tmp_path):
    clock = Clock()
    runner = Runner(clock, answers={"gpufleet-cloud-stop": [1, 1, 0]})
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, final_action="stop",
                                     stop_command=("gpufleet-cloud-stop", "--provider", "tencent"))
    final = pipe.handle(event(clock))["final"]
    assert final["ok"] is True and len(final["attempts"]) == 3
    assert [t for argv, t in runner.calls if argv == ["sleep"]] == [2.0, 4.0]


def test_a_stop_that_keeps_failing_is_recorded_as_failed(tmp_path):
    clock = Clock()
    runner = Runner(clock, answers={"gpufleet-cloud-stop": 1})
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, final_action="stop", stop_attempts=3,
                                     stop_command=("gpufleet-cloud-stop",))
    final = pipe.handle(event(clock))["final"]
    assert final["ok"] is False and [a["rc"] for a in final["attempts"]] == [1, 1, 1]


def test_a_stop_refused_for_good_is_not_tried_again(tmp_path):
    # Exit status 2: the credentials, a permission, an unknown instance.
    clock = Clock()
    runner = Runner(clock, answers={"gpufleet-cloud-stop": [1, 2, 0]})
    pipe, _events, _saves = pipeline(tmp_path, clock, runner, final_action="stop",
                                     stop_command=("gpufleet-cloud-stop",))
    final = pipe.handle(event(clock))["final"]
    assert final["ok"] is False and [a["rc"] for a in final["attempts"]] == [1, 2]


def test_a_real_hook_past_its_time_is_cut_off(tmp_path):
    # The real subprocess.run: the hook sleeps past the time left and is killed.
    pipe, _events, _saves = pipeline(tmp_path, __import__("time").time, subprocess.run,
                                     hook=(sys.executable, "-c", "import time; time.sleep(30)"), hook_margin_seconds=0)
    now = __import__("time").time()
    record = pipe.handle(actions.Event("idle-1", "idle", "idle for 600 s", now + 1.0))
    assert record["hook"]["landed"] is False and "timed out" in record["hook"]["detail"]


@pytest.mark.parametrize(("config", "message"), [
    ({"final_action": "terminate"}, "final_action must be one of none, stop, poweroff"),
    ({"final_action": "stop"}, "needs the stop_command"),
    ({"signal": "SIGKILL"}, "signal must be SIGTERM, SIGUSR1"),
])
def test_bad_configuration_is_refused_by_name(tmp_path, config, message):
    with pytest.raises(ValueError, match=message):
        actions.ActionConfig(marker_path=str(tmp_path / "event.json"), **config)


class JobRunner:
    """systemctl and docker as a job that ends after `ends_after` state
    reads (never, with None); the clock moves with each sleep."""

    def __init__(self, clock, ends_after=None, docker=True):
        self.clock, self.ends_after, self.docker, self.calls, self.reads = clock, ends_after, docker, [], 0

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        if argv[0] == "docker" and not self.docker:
            raise FileNotFoundError(2, "No such file or directory", "docker")
        if argv[:2] == ["systemctl", "is-active"]:
            self.reads += 1
            ended = self.ends_after is not None and self.reads > self.ends_after
            return subprocess.CompletedProcess(argv, 3 if ended else 0, "inactive\n" if ended else "active\n", "")
        if argv[:2] == ["docker", "inspect"]:
            ended = self.ends_after is not None and self.reads > self.ends_after
            return subprocess.CompletedProcess(argv, 0, "false\n" if ended else "true\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def sleep(self, seconds):
        self.clock.now += seconds


def job_pipeline(tmp_path, clock, runner, **config):
    config = {"marker_path": str(tmp_path / "event.json"), "job_units": ("train.service",),
              "hook": ("/usr/local/bin/checkpoint",), **config}
    return actions.Pipeline(actions.ActionConfig(**config), {}, lambda: None, run=runner, clock=clock,
                            sleep=runner.sleep)


def test_after_sigterm_the_hook_waits_for_the_job_to_save_and_end(tmp_path):
    clock = Clock()
    runner = JobRunner(clock, ends_after=3)
    record = job_pipeline(tmp_path, clock, runner).handle(event(clock, lead=120))
    hook_at = runner.calls.index(["/usr/local/bin/checkpoint"])
    reads = [c for c in runner.calls[:hook_at] if c[:2] == ["systemctl", "is-active"]]
    assert len(reads) == 4, runner.calls  # three reads while it ran, one that saw it end
    assert record["hook"]["job"] == {"stopped": True, "still_running": [], "waited_seconds": 3.0}
    assert record["hook"]["landed"] is True


def test_a_job_that_does_not_end_still_leaves_the_hook_half_the_time(tmp_path):
    clock = Clock()
    runner = JobRunner(clock, ends_after=None)
    record = job_pipeline(tmp_path, clock, runner, job_containers=("trainer",)).handle(event(clock, lead=120))
    job = record["hook"]["job"]
    assert job["stopped"] is False and job["still_running"] == ["unit:train.service", "container:trainer"]
    # 110 s left after the margin: it waits 55 s, and the hook runs in time.
    assert job["waited_seconds"] == 55.0
    assert record["hook"]["landed"] is True and record["hook"]["rc"] == 0


def test_a_container_whose_state_cannot_be_read_counts_as_running(tmp_path):
    clock = Clock()
    runner = JobRunner(clock, ends_after=0, docker=False)
    record = job_pipeline(tmp_path, clock, runner, job_units=(), job_containers=("trainer",)).handle(
        event(clock, lead=40))
    assert record["hook"]["job"]["still_running"] == ["container:trainer"]
    assert record["hook"]["job"]["waited_seconds"] == 15.0


@pytest.mark.parametrize("signal", ["SIGUSR1", "SIGUSR2"])
def test_a_job_asked_only_to_save_is_not_waited_for(tmp_path, signal):
    clock = Clock()
    runner = JobRunner(clock, ends_after=None)
    record = job_pipeline(tmp_path, clock, runner, signal=signal).handle(event(clock))
    assert not any(c[:2] == ["systemctl", "is-active"] for c in runner.calls)
    assert "job" not in record["hook"]


def test_a_unit_still_deactivating_counts_as_running(tmp_path):
    # is-active exits 3 for "deactivating" as for "inactive": the state
    # printed decides, and a warning on stderr is not the state.
    clock = Clock()
    answers = iter([(3, "deactivating\n"), (3, "deactivating\n"), (3, "inactive\n")])

    def runner(argv, **kwargs):
        if argv[:2] == ["systemctl", "is-active"]:
            rc, out = next(answers)
            return subprocess.CompletedProcess(argv, rc, out, "Warning: the unit file changed on disk")
        return subprocess.CompletedProcess(argv, 0, "", "")

    pipe = actions.Pipeline(actions.ActionConfig(marker_path=str(tmp_path / "event.json"),
                                                 job_units=("train.service",), hook=("/usr/local/bin/checkpoint",)),
                            {}, lambda: None, run=runner, clock=clock,
                            sleep=lambda s: setattr(clock, "now", clock.now + s))
    record = pipe.handle(event(clock, lead=120))
    assert record["hook"]["job"] == {"stopped": True, "still_running": [], "waited_seconds": 2.0}
