#!/usr/bin/env python3
"""A toy training job that does what the guard asks of a real one.

It fits a line to synthetic data by stochastic gradient descent: pure
Python, no GPU, so it runs on any node and in any test. What matters is how
it behaves around the guard (docs/guard.md):

- it checkpoints every --every steps, and whenever it gets SIGTERM, SIGINT
  or SIGUSR1 (the signals `guard_signal` can send);
- after SIGTERM or SIGINT it exits 0 once the checkpoint is on disk; after
  SIGUSR1 it trains on (a job that only saves, as Lightning's requeue
  handler does before the scheduler takes over);
- it starts from its last checkpoint, so a job moved to a new node with its
  checkpoint directory (restored from object storage) resumes at the saved
  step;
- each step's data comes from a generator seeded by the step number, so a
  resumed run ends with exactly the weights of a run that was never
  stopped: the tests compare them bit for bit.

A checkpoint is `ckpt-<step>.json`, written to a temporary file, flushed
and renamed, then `latest` is pointed at it the same way: a job stopped
mid-write leaves the previous checkpoint whole. When the signal came from
the guard, the checkpoint records the guard's event ID from its marker file
(`--marker`), so a run can be tied to the event that stopped it.

A checkpoint directory that holds something unreadable is an error that
names the file: starting again from step 0 would silently throw the
training away.

    toy_train.py --checkpoint-dir /srv/data/ckpt --steps 500
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

SCHEMA = 1
# The line the data come from; the job learns it.
TRUE_SLOPE, TRUE_INTERCEPT = 3.0, -2.0


class CheckpointError(Exception):
    """The checkpoint directory holds something that cannot be resumed from."""


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def load(directory: str) -> dict | None:
    """The last checkpoint, or None where the directory has none yet."""
    pointer = os.path.join(directory, "latest")
    if not os.path.exists(pointer):
        return None
    with open(pointer, encoding="utf-8") as handle:
        name = handle.read().strip()
    path = os.path.join(directory, name)
    if os.path.basename(name) != name or not name.startswith("ckpt-"):
        raise CheckpointError(f"{pointer} names {name!r}, not a checkpoint file in {directory}")
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} (named by {pointer}) cannot be read: {exc}") from exc
    required = {"schema": int, "step": int, "slope": float, "intercept": float}
    for key, kind in required.items():
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise CheckpointError(f"{path}: {key!r} is missing or not a {kind.__name__}")
    if state["schema"] != SCHEMA:
        raise CheckpointError(f"{path}: schema {state['schema']}, this job reads {SCHEMA}")
    return state


def save(directory: str, state: dict, reason: str, marker: str | None) -> str:
    record = dict(state, schema=SCHEMA, reason=reason, saved_at=time.time())
    event = _event_id(marker) if marker else None
    if event:
        record["guard_event"] = event
    name = f"ckpt-{state['step']:08d}.json"
    _write_atomic(os.path.join(directory, name), json.dumps(record, sort_keys=True) + "\n")
    _write_atomic(os.path.join(directory, "latest"), name + "\n")
    return name


def _event_id(marker: str) -> str | None:
    """The guard's event ID from its marker file; None where there is none
    or it cannot be read (a checkpoint is still written)."""
    try:
        with open(marker, encoding="utf-8") as handle:
            value = json.load(handle).get("event_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def train_step(state: dict, rate: float) -> float:
    """One SGD step on a batch seeded by the step number; returns the loss."""
    rng = random.Random(state["step"])
    grad_slope = grad_intercept = loss = 0.0
    batch = 16
    for _sample in range(batch):
        x = rng.uniform(-1.0, 1.0)
        y = TRUE_SLOPE * x + TRUE_INTERCEPT + rng.gauss(0.0, 0.1)
        error = state["slope"] * x + state["intercept"] - y
        grad_slope += 2.0 * error * x / batch
        grad_intercept += 2.0 * error / batch
        loss += error * error / batch
    state["slope"] -= rate * grad_slope
    state["intercept"] -= rate * grad_intercept
    state["step"] += 1
    return loss


def run(args: argparse.Namespace) -> int:
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    try:
        state = load(args.checkpoint_dir)
    except CheckpointError as exc:
        print(f"toy_train: {exc}; move it away to start from step 0", file=sys.stderr)
        return 2
    # The handlers go in before the first line is printed: a caller that
    # waits for that line may signal the job at once.
    received: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, lambda num, _frame: received.append(num))
    if state is None:
        state = {"step": 0, "slope": 0.0, "intercept": 0.0}
        print("toy_train: no checkpoint, starting at step 0", flush=True)
    else:
        state = {key: state[key] for key in ("step", "slope", "intercept")}
        print(f"toy_train: resumed at step {state['step']}", flush=True)

    while state["step"] < args.steps:
        loss = train_step(state, args.rate)
        if state["step"] % args.every == 0:
            save(args.checkpoint_dir, state, "periodic", None)
            print(f"toy_train: step {state['step']} loss {loss:.6f}", flush=True)
        if received:
            signum = received.pop(0)
            name = save(args.checkpoint_dir, state, signal.Signals(signum).name, args.marker)
            print(f"toy_train: {signal.Signals(signum).name}: saved {name} at step {state['step']}", flush=True)
            if signum != signal.SIGUSR1:
                return 0
        time.sleep(args.step_seconds)
    name = save(args.checkpoint_dir, state, "done", None)
    print(f"toy_train: done at step {state['step']}: slope {state['slope']!r} intercept {state['intercept']!r}"
          f" ({name})", flush=True)
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--steps", type=int, default=1000, help="train until this step (default 1000)")
    parser.add_argument("--every", type=int, default=50, help="checkpoint every N steps (default 50)")
    parser.add_argument("--step-seconds", type=float, default=0.1, help="pause per step (default 0.1)")
    parser.add_argument("--rate", type=float, default=0.05, help="learning rate (default 0.05)")
    parser.add_argument("--marker", default="/run/gpufleet-guard/event.json",
                        help="the guard's marker file, for the event ID (default: guard_marker_path's default)")
    args = parser.parse_args(argv)
    for option in ("steps", "every"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be 1 or more")
    if args.step_seconds < 0:
        parser.error("--step-seconds must be 0 or more")
    return args


if __name__ == "__main__":
    sys.exit(run(parse(sys.argv[1:])))
