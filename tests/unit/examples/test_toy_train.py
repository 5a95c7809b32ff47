"""The example training job (examples/toy_train.py), run as a process and
signalled as the guard signals it: it checkpoints, exits or trains on, and
resumes at the saved step with exactly the weights of a run never stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

JOB = Path(__file__).resolve().parents[3] / "examples" / "toy_train.py"


def start(ckpt: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(JOB), "--checkpoint-dir", str(ckpt), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(ckpt: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(JOB), "--checkpoint-dir", str(ckpt), *args],
                          capture_output=True, text=True, timeout=120, check=False)


def latest(ckpt: Path) -> dict:
    return json.loads((ckpt / (ckpt / "latest").read_text().strip()).read_text())


def wait_for_step(ckpt: Path, step: int, proc: subprocess.Popen, deadline_s: float = 60.0) -> None:
    """Until a periodic checkpoint at `step` or later is on disk."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if (ckpt / "latest").exists() and latest(ckpt)["step"] >= step:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    pytest.fail(f"no checkpoint at step {step} within {deadline_s} s")


def uninterrupted(tmp_path: Path, steps: int) -> dict:
    done = finish(tmp_path / "straight", "--steps", str(steps), "--every", "10", "--step-seconds", "0")
    assert done.returncode == 0, done.stderr
    return latest(tmp_path / "straight")


def test_sigterm_checkpoints_exits_0_and_the_next_start_resumes_to_the_same_weights(tmp_path):
    steps = 400
    expected = uninterrupted(tmp_path, steps)
    ckpt = tmp_path / "ckpt"
    marker = tmp_path / "event.json"
    marker.write_text(json.dumps({"event_id": "spot-aws-1700000000", "reason": "spot"}))
    job = start(ckpt, "--steps", str(steps), "--every", "10", "--step-seconds", "0.01", "--marker", str(marker))
    wait_for_step(ckpt, 20, job)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    saved = latest(ckpt)
    assert saved["reason"] == "SIGTERM" and saved["guard_event"] == "spot-aws-1700000000"
    assert 20 <= saved["step"] < steps, saved
    assert f"SIGTERM: saved ckpt-{saved['step']:08d}.json" in out

    resumed = finish(ckpt, "--steps", str(steps), "--every", "10", "--step-seconds", "0")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed at step {saved['step']}" in resumed.stdout
    final = latest(ckpt)
    assert final["step"] == steps and final["reason"] == "done"
    # Bit for bit: each step's batch is seeded by its number.
    assert (final["slope"], final["intercept"]) == (expected["slope"], expected["intercept"])
    assert abs(final["slope"] - 3.0) < 0.1 and abs(final["intercept"] + 2.0) < 0.1


def test_sigusr1_checkpoints_and_trains_on(tmp_path):
    ckpt = tmp_path / "ckpt"
    job = start(ckpt, "--steps", "100000", "--every", "1000", "--step-seconds", "0.005",
                "--marker", str(tmp_path / "absent.json"))
    try:
        # The first line comes after the signal handlers are in.
        assert "starting at step 0" in job.stdout.readline()
        job.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while not (ckpt / "latest").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        saved = latest(ckpt)
        assert saved["reason"] == "SIGUSR1" and "guard_event" not in saved
        wait_for_step(ckpt, saved["step"] + 1000, job)
        assert job.poll() is None, "the job stopped after SIGUSR1"
    finally:
        job.kill()
        job.communicate()


def test_a_stop_during_a_write_leaves_the_previous_checkpoint_whole(tmp_path):
    ckpt = tmp_path / "ckpt"
    assert finish(ckpt, "--steps", "30", "--every", "10", "--step-seconds", "0").returncode == 0
    # What a kill between the write and the rename leaves behind.
    (ckpt / "ckpt-00000040.json.tmp-123").write_text('{"step": 4')
    (ckpt / "latest.tmp-123").write_text("ckpt-00000040.json")
    resumed = finish(ckpt, "--steps", "50", "--every", "10", "--step-seconds", "0")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step 30" in resumed.stdout


@pytest.mark.parametrize("damage, says", [
    (lambda d: (d / "ckpt-00000010.json").write_text("{not json"), "cannot be read"),
    (lambda d: (d / "ckpt-00000010.json").unlink(), "cannot be read"),
    (lambda d: (d / "latest").write_text("../../etc/passwd\n"), "not a checkpoint file"),
    (lambda d: (d / "ckpt-00000010.json").write_text('{"schema": 1, "step": "10", "slope": 1.0, "intercept": 0.0}'),
     "'step' is missing or not a int"),
    (lambda d: (d / "ckpt-00000010.json").write_text('{"schema": 9, "step": 10, "slope": 1.0, "intercept": 0.0}'),
     "schema 9"),
], ids=["not JSON", "missing", "outside the directory", "step a string", "unknown schema"])
def test_an_unreadable_checkpoint_is_an_error_never_a_fresh_start(tmp_path, damage, says):
    ckpt = tmp_path / "ckpt"
    assert finish(ckpt, "--steps", "10", "--every", "10", "--step-seconds", "0").returncode == 0
    damage(ckpt)
    result = finish(ckpt, "--steps", "20", "--step-seconds", "0")
    assert result.returncode == 2
    assert says in result.stderr and "move it away" in result.stderr, result.stderr
    assert "starting at step 0" not in result.stdout


@pytest.mark.parametrize("args, says", [
    (("--steps", "0"), "--steps must be 1 or more"),
    (("--every", "-1"), "--every must be 1 or more"),
    (("--step-seconds", "-0.5"), "--step-seconds must be 0 or more"),
])
def test_bad_options_are_named(tmp_path, args, says):
    result = finish(tmp_path / "ckpt", *args)
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert not (tmp_path / "ckpt").exists()
