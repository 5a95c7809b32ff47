"""The Ansible controller's Python, side by side: ``make bench-controller``
(python -m bench.controller).

The project's virtual environments are made with ``PYTHON`` (the
Makefile's, Debian's /usr/bin/python3, built with PGO and LTO). The first
python3 on a machine's PATH can be another build: on ours, pyenv's 3.11,
compiled without --enable-optimizations. Most of the test loop's CPU is
Ansible's controller (docs/performance.md, "Where the CPU goes"), so the
interpreter it runs on is measured here, on the loop's own kind of work:

- ``venv``: this checkout's .venv, as `make venv` made it;
- ``other``: a virtual environment with the same pinned packages
  (requirements/constraints.txt) made with ``--python`` (default: the
  first python3 on PATH outside .venv), in .cache/bench-controller.

The same run, ROLES in check mode on one fresh Debian 12 podman node
through Mitogen (as the Molecule scenarios' check pass), alternates
between the two ROUNDS times. Each run is timed from the outside: wall,
the CPU-seconds of ansible-playbook and everything it started on this
machine (wait4 of its process tree), and the machine's busy CPU-seconds
(/proc/stat: run it on a quiet machine). The ratio is taken within this
one run. Figures go to bench/controller/results.md. Nothing is asserted
about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.fleet.__main__ import measure
from bench.interpreter.__main__ import with_busy_cpu
from tests.support.nodes import PODMAN_CONNECTION, PODMAN_ENV, ROOT, ansible_env, booted_node, recap, roles_play

ROLES = ["gpufleet.cloud.baseline", "gpufleet.cloud.security", "gpufleet.cloud.monitoring",
         "gpufleet.cloud.node_health"]
VARIABLES = {"baseline_ntp_servers": ["127.0.0.1"], "security_ssh_allowed_cidrs": ["10.0.0.0/8"],
             "security_monitoring_cidrs": ["10.0.0.0/8"]}
NODE = "bench-controller-debian12"


def other_python() -> str:
    """The first python3 on PATH that is not this checkout's .venv's."""
    venv_bin = str(ROOT / ".venv" / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    found = shutil.which("python3", path=path)
    if not found:
        sys.exit("bench-controller: no python3 on PATH outside .venv; name one with --python")
    # Through a shim (pyenv's), to the interpreter itself.
    return subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                          check=True).stdout.strip()


def make_venv(python: str, where: Path) -> Path:
    """A virtual environment of `python` with this checkout's pinned
    packages; its bin directory. Made again when it is another
    interpreter's."""
    marker = where / "made-with"
    if not (marker.exists() and marker.read_text() == python):
        shutil.rmtree(where, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(where)], check=True)
        pip = [str(where / "bin" / "pip"), "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip>=24"], check=True)
        subprocess.run([*pip, "-c", str(ROOT / "requirements" / "constraints.txt"), "-e", str(ROOT)], check=True,
                       cwd=ROOT)
        marker.write_text(python)
    return where / "bin"


def version(bin_dir: Path) -> str:
    return subprocess.run([str(bin_dir / "python"), "-c", "import sys; print(sys.version.split()[0], sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def run(bin_dir: Path, play: Path, log: Path) -> tuple[float, float, float]:
    """One check-mode run of the play on the node: wall seconds, the
    run's own CPU-seconds on this machine (wait4 of its process tree), the
    machine's busy CPU-seconds."""
    env = {**ansible_env(), **PODMAN_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    argv = [str(bin_dir / "ansible-playbook"), "--check", "-i", f"{NODE},", "-c", PODMAN_CONNECTION,
            "-e", json.dumps(VARIABLES), str(play)]
    figures = with_busy_cpu(lambda: measure(argv, env, log))
    if figures["rc"] != 0 or NODE not in recap(log.read_text()):
        sys.exit(f"bench-controller: the run with {bin_dir} failed (exit {figures['rc']}):\n{log.read_text()[-3000:]}")
    return figures["wall"], figures["cpu"], figures["busy_cpu"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--python", help="the other interpreter (default: the first python3 on PATH outside .venv)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "controller" / "results.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    bins = {"venv": ROOT / ".venv" / "bin",
            "other": make_venv(args.python or other_python(), ROOT / ".cache" / "bench-controller" / "venv")}
    versions = {alt: version(bin_dir) for alt, bin_dir in bins.items()}
    figures: dict[str, list[tuple[float, float, float]]] = {alt: [] for alt in bins}
    with tempfile.TemporaryDirectory() as tmp:
        play = Path(tmp) / "play.yml"
        play.write_text(roles_play(ROLES))
        subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "0", NODE], capture_output=True, check=False)
        with booted_node(NODE, "localhost/gpufleet-debian:12"):
            for _round in range(args.rounds):
                for alt, bin_dir in bins.items():
                    figures[alt].append(run(bin_dir, play, Path(tmp) / f"{alt}.log"))
    text = table(figures, versions, args.rounds)
    args.out.write_text(text + "\n")
    print(text)
    return 0


def table(figures: dict[str, list[tuple[float, float, float]]], versions: dict[str, str], rounds: int) -> str:
    """The results' Markdown: each alternative's median wall, own CPU and
    busy CPU over the rounds, and the ratios other / venv."""
    def median(alt: str, index: int) -> float:
        return statistics.median_high(f[index] for f in figures[alt])

    lines = ["# The Ansible controller's Python", "",
             f"`python -m bench.controller --rounds {rounds}`: {', '.join(ROLES)} in check mode on one fresh",
             "Debian 12 podman node through Mitogen, the two interpreters alternating; the median of the",
             "rounds in seconds: wall, the run's own CPU on this machine (ansible-playbook and what it",
             "started), and the machine's busy CPU. Ratio: other / venv.", "",
             "| | Python | wall | own CPU | busy CPU |", "|---|---|---:|---:|---:|"]
    for alt in figures:
        lines.append(f"| {alt} | {versions[alt]} | {median(alt, 0):.1f} | {median(alt, 1):.1f} | "
                     f"{median(alt, 2):.1f} |")
    lines.append(f"| ratio | | {median('other', 0) / median('venv', 0):.2f} | "
                 f"{median('other', 1) / median('venv', 1):.2f} | {median('other', 2) / median('venv', 2):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
