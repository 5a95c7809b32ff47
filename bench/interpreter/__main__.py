"""A podman test node's Python, discovered or named, side by side:
``make bench-interpreter`` (python -m bench.interpreter).

Over a podman connection, Mitogen runs Ansible's interpreter discovery
again for every task and tries the candidates in Ansible's order
(python3.13, python3.12, ...), each a `podman exec`; on Debian 12 the first
two fail. The test nodes therefore name theirs (PODMAN_ENV in
tests/support/nodes.py, the group variable in extensions/molecule/
config.yml). The same play of TASKS `stat` tasks runs on one node per
Debian release:

- ``discovered``: the project's ansible.cfg as it is (interpreter_python
  auto_silent);
- ``named``: with PODMAN_ENV (ansible_python_interpreter /usr/bin/python3).

Each run is timed from the outside: wall, the machine's busy CPU-seconds
(/proc/stat, so podman, runc and conmon count too: run it on a quiet
machine), and the `podman exec` calls (through a logging `podman` first on
PATH). The two alternate,
ROUNDS times; the ratio is taken within this one run. Figures go to
bench/interpreter/results.md. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.nodes import PODMAN_CONNECTION, PODMAN_ENV, ROOT, ansible_env, booted_node

TASKS = 30
ALTERNATIVES = {"discovered": {}, "named": PODMAN_ENV}
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
""" + "".join(f"""
    - name: Read the hostname file, {i}
      ansible.builtin.stat:
        path: /etc/hostname
""" for i in range(TASKS))


def busy_jiffies() -> int:
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return user + nice + system + irq + softirq + steal


def with_busy_cpu(run) -> dict:
    """run() timed from the outside: its figures (a dict) with ``wall`` and
    ``busy_cpu`` (the machine's busy CPU-seconds meanwhile) added."""
    before, start = busy_jiffies(), time.monotonic()
    figures = run()
    figures["wall"] = round(time.monotonic() - start, 2)
    figures["busy_cpu"] = round((busy_jiffies() - before) / os.sysconf("SC_CLK_TCK"), 2)
    return figures


def counting_podman(where: Path) -> tuple[str, Path]:
    """A directory for the front of PATH whose `podman` logs each call to
    a file and then runs the real one: podman's own exec events leave out
    the execs that fail to start, which are the ones this is about. Returns
    the directory and the log."""
    real, log = shutil.which("podman"), where / "podman-calls.log"
    assert real, "podman is not on PATH"
    (where / "bin").mkdir()
    wrapper = where / "bin" / "podman"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper.parent), log


def execs(log: Path) -> int:
    """The `podman exec` calls in the log, which is emptied."""
    calls = log.read_text().split() if log.exists() else []
    log.write_text("")
    return calls.count("exec")


def run(node: str, play: Path, env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """One run of the play on `node`: wall seconds, busy CPU-seconds, execs."""
    execs(log)
    argv = [shutil.which("ansible-playbook"), "-i", f"{node},", "-c", PODMAN_CONNECTION, str(play)]
    figures = with_busy_cpu(lambda: {"result": subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                                                              check=False)})
    result = figures["result"]
    if result.returncode != 0:
        sys.exit(f"bench-interpreter: the run on {node} failed (exit {result.returncode}):\n{result.stdout[-3000:]}")
    return figures["wall"], figures["busy_cpu"], execs(log)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "interpreter" / "results.md")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, list[tuple[float, float, int]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        play = Path(tmp) / "play.yml"
        play.write_text(PLAY)
        wrappers, log = counting_podman(Path(tmp))
        # Each alternative's own setting, never one from the caller's environment.
        env = {k: v for k, v in ansible_env().items() if k != "ANSIBLE_PYTHON_INTERPRETER"}
        env["PATH"] = f"{wrappers}:{env['PATH']}"
        for release in ("12", "13"):
            node = f"bench-interpreter-debian{release}"
            subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "0", node], capture_output=True, check=False)
            with booted_node(node, f"localhost/gpufleet-debian:{release}"):
                figures[release] = {alt: [] for alt in ALTERNATIVES}
                for _round in range(args.rounds):
                    for alt, setting in ALTERNATIVES.items():
                        figures[release][alt].append(run(node, play, env | setting, log))
    text = table(figures, args.rounds)
    args.out.write_text(text + "\n")
    print(text)
    return 0


def table(figures: dict[str, dict[str, list[tuple[float, float, int]]]], rounds: int) -> str:
    """The results' Markdown: per release, the median wall, CPU and execs
    of each alternative over the rounds, and the wall ratio discovered /
    named."""
    def median(release: str, alt: str, index: int) -> float:
        return statistics.median_high(f[index] for f in figures[release][alt])

    lines = ["# A podman test node's Python, discovered or named", "",
             f"`python -m bench.interpreter --rounds {rounds}`: one ansible-playbook run of {TASKS} `stat`",
             "tasks on one podman node per Debian release, through Mitogen; the median of the rounds:",
             "wall and the machine's busy CPU in seconds, and the `podman exec` calls.",
             "Ratio: discovered / named, wall.", "",
             "| Debian | discovered wall | named wall | ratio | discovered CPU | named CPU | discovered execs | "
             "named execs |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for release in figures:
        found, named = median(release, "discovered", 0), median(release, "named", 0)
        lines.append(f"| {release} | {found:.1f} | {named:.1f} | {found / named:.2f} | "
                     f"{median(release, 'discovered', 1):.1f} | {median(release, 'named', 1):.1f} | "
                     f"{median(release, 'discovered', 2):.0f} | {median(release, 'named', 2):.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
