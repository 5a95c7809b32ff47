"""Molecule's create and destroy, side by side: ``make bench-molecule``
(python -m bench.molecule).

The same platforms (the monitoring scenario's two nodes, one per Debian
release, a published port each) are created and destroyed by:

- ``driver``: the podman driver's own create.yml and destroy.yml
  (molecule-plugins), which start and remove each node as an async job and
  poll it;
- ``gpufleet``: extensions/molecule/shared/create.yml and destroy.yml, one
  synchronous ``podman run`` per node (then a wait for its systemd to
  finish booting) and one ``podman rm --time 0`` for all.

Each is one ansible-playbook run with the variables Molecule gives it
(``molecule_yml``), timed from the outside (wall, and the CPU of
ansible-playbook and its children, from getrusage). Each pair runs ROUNDS times, the
two alternating; the ratio is taken within this one run. Figures go to
bench/molecule/results.md. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import molecule_plugins.podman as podman_driver

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(podman_driver.__file__).parent / "playbooks"
OURS = ROOT / "extensions" / "molecule" / "shared"
PLATFORMS = [
    {"name": f"bench-molecule-debian{release}", "image": f"localhost/gpufleet-debian:{release}",
     "pre_build_image": True, "command": "/sbin/init", "systemd": "always",
     "hostname": f"bench-molecule-debian{release}", "groups": ["molecule"],
     "published_ports": [f"127.0.0.{80 + i}:9100:9100/tcp"]}
    for i, release in enumerate(("12", "13"))
]


def run(playbook: Path, extra: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run([shutil.which("ansible-playbook"), "-i", "localhost,", "-e", f"@{extra}", str(playbook)],
                            env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"bench-molecule: {playbook} failed (exit {result.returncode}):\n{result.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "molecule" / "results.md")
    args = parser.parse_args(argv)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STRATEGY": "linear",
           "ANSIBLE_NOCOLOR": "1"}
    figures: dict[str, dict[str, list[tuple[float, float]]]] = {
        alt: {"create": [], "destroy": []} for alt in ("driver", "gpufleet")}
    with tempfile.TemporaryDirectory() as tmp:
        extra = Path(tmp) / "vars.json"
        extra.write_text(json.dumps({"molecule_yml": {"platforms": PLATFORMS}, "molecule_no_log": False,
                                     "molecule_ephemeral_directory": tmp, "molecule_scenario_directory": tmp,
                                     # As Molecule does: this Python, not whatever discovery finds.
                                     "ansible_python_interpreter": sys.executable}))
        subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "0"] + [p["name"] for p in PLATFORMS],
                       capture_output=True, check=False)
        for _round in range(args.rounds):
            for alt, where in (("driver", DRIVER), ("gpufleet", OURS)):
                for step in ("create", "destroy"):
                    figures[alt][step].append(run(where / f"{step}.yml", extra, env))
    text = table(figures, args.rounds)
    args.out.write_text(text + "\n")
    print(text)
    return 0


def table(figures: dict[str, dict[str, list[tuple[float, float]]]], rounds: int) -> str:
    """The results' Markdown: per step, the median wall and CPU of each
    alternative over the rounds, and the wall ratio driver / gpufleet."""
    def median(alt: str, step: str, index: int) -> float:
        values = sorted(f[index] for f in figures[alt][step])
        return values[len(values) // 2]

    lines = ["# Molecule's create and destroy: the podman driver's playbooks against ours", "",
             f"`python -m bench.molecule --rounds {rounds}`: two nodes (the monitoring scenario's",
             "platforms), each step one ansible-playbook run; the median of the rounds, wall and",
             "CPU (ansible-playbook and its children) in seconds. Ratio: driver / gpufleet.", "",
             "| step | driver wall | gpufleet wall | ratio | driver CPU | gpufleet CPU |", "|---|---:|---:|---:|---:|---:|"]
    for step in ("create", "destroy"):
        driver, ours = median("driver", step, 0), median("gpufleet", step, 0)
        lines.append(f"| {step} | {driver:.1f} | {ours:.1f} | {driver / ours:.2f} | "
                     f"{median('driver', step, 1):.1f} | {median('gpufleet', step, 1):.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
