"""Run a command several times in a row while CPU-burning processes run
beside it, the way a busy CI machine or a developer's laptop looks.

Usage: soak.py [--runs N] [--burners K] -- COMMAND [ARG ...]

Each run's result and seconds are printed, then a summary line
`soak: P of N runs passed under K burners`. Stops at the first failed run
(the rest would prove nothing more) and exits 1; exits 0 when every run
passed. The burners are ended whatever happens."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

# A busy loop in its own interpreter: one full CPU each, no I/O.
BURN = "while True:\n    pass\n"


def start_burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _burner in range(count)]  # pylint: disable=consider-using-with


def stop_burners(burners: list[subprocess.Popen]) -> None:
    for proc in burners:
        proc.kill()
    for proc in burners:
        proc.wait()


def soak(command: list[str], runs: int, burners: int, log=print) -> int:
    """Run `command` up to `runs` times beside `burners` busy loops; the
    number of runs that passed (stops at the first failure)."""
    procs = start_burners(burners)
    passed = 0
    try:
        for run in range(1, runs + 1):
            if any(p.poll() is not None for p in procs):
                raise RuntimeError("a CPU burner ended early: the load is not what this run claims")
            start = time.monotonic()
            rc = subprocess.run(command, check=False).returncode
            seconds = time.monotonic() - start
            log(f"soak: run {run} of {runs}: {'passed' if rc == 0 else f'failed (exit {rc})'} in {seconds:.0f} s")
            if rc != 0:
                break
            passed += 1
    finally:
        stop_burners(procs)
    log(f"soak: {passed} of {runs} runs passed under {burners} CPU burner(s)")
    return passed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="soak.py", description=__doc__.strip().splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs in a row (default 5)")
    parser.add_argument("--burners", type=int, default=2, help="CPU-burning processes beside them (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: put it after --, for example: soak.py -- make unit")
    if args.runs < 1 or args.burners < 0:
        parser.error("--runs must be at least 1 and --burners at least 0")
    return 0 if soak(command, args.runs, args.burners) == args.runs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
