"""The fleet benchmark: ``make bench-fleet`` (python -m bench.fleet).

Scales the lab fleet to 1, 4 and 8 nodes and, at each size, measures on the
converged fleet:

- a no-op converge: ``ansible-playbook site.yml -i inventories/lab``, which
  must report changed=0 and failed=0 on every node (otherwise the figure is
  not a no-op and the benchmark stops);
- a drift scan: ``gpufleet drift -i inventories/lab``, which must exit 0.

Each is run three times, side by side:

- ``gpufleet``: gpufleet's ``ansible.cfg`` as it is;
- ``linear``: the same with Ansible's own linear strategy instead of
  gpufleet.cloud.mitogen_linear, which tells Mitogen's share apart;
- ``defaults``: Ansible's defaults, that is a config file that only tells
  Ansible where the collection and its dependencies are. Every measured run starts
with no SSH connection open (a fresh ControlPath directory), as a user's
first run of the day does; the converge before the measurements is what
brings new nodes up to date and is reported, not compared.

Each figure is one process, measured from the outside with wait4: wall time
and controller CPU time (user + system of ansible-playbook and its workers;
the nodes' own CPU is not in it). Ratios are taken within this one run.
Figures go to bench/fleet/results.md and results.json. Nothing is asserted
about time: a slow machine gives slow figures, not a failure.

The benchmark takes over the lab (``gpufleet lab up -n N``), and leaves it
at the largest size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.interpreter.__main__ import with_busy_cpu

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "bench" / "fleet"
BIN = Path(sys.executable).parent
INVENTORY = "inventories/lab"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)", re.M)

# Only where things are: the collection (through collections/) and its
# pinned dependencies. Everything else is Ansible's default: forks 5,
# implicit gathering of every fact subset, no fact cache, no pipelining.
DEFAULTS_CFG = """[defaults]
collections_path = {root}/collections:{root}/.collections
roles_path = {root}/roles
"""


class NotANoOp(RuntimeError):
    pass


CONFIGS = ("gpufleet", "linear", "defaults")


def configs(folder: Path) -> dict[str, tuple[Path, dict[str, str]]]:
    """Each config: its file, and environment it adds."""
    defaults = folder / "ansible-defaults.cfg"
    defaults.write_text(DEFAULTS_CFG.format(root=ROOT))
    return {"gpufleet": (ROOT / "ansible.cfg", {}),
            "linear": (ROOT / "ansible.cfg", {"ANSIBLE_STRATEGY": "ansible.builtin.linear"}),
            "defaults": (defaults, {})}


def measure(argv: list[str], env: dict[str, str], log: Path) -> dict:
    """Run argv to the end; wall, CPU (its whole waited-for tree) and the
    machine's busy CPU over the run (the lab nodes' side too, which runs in
    containers outside argv's tree)."""
    def run() -> dict:
        with log.open("w") as out:
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            _pid, status, usage = os.wait4(process.pid, 0)
        return {"rc": os.waitstatus_to_exitcode(status), "cpu": round(usage.ru_utime + usage.ru_stime, 2)}
    return with_busy_cpu(run)


def run_env(config: tuple[Path, dict[str, str]], control_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    path, extra = config
    env.update({
        "ANSIBLE_CONFIG": str(path),
        "ANSIBLE_NOCOLOR": "1",
        # A fresh directory: no SSH master from an earlier run is reused.
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}",
        **extra,
    })
    return env


def recap(log: Path) -> dict[str, dict[str, int]]:
    return {host: {"ok": int(ok), "changed": int(changed), "unreachable": int(unreach), "failed": int(failed),
                   "skipped": int(skipped)}
            for host, ok, changed, unreach, failed, skipped in RECAP.findall(log.read_text())}


def converge(config, work: Path, name: str, nodes: int, require_noop: bool) -> dict:
    log = CACHE / f"{name}.log"
    result = measure([str(BIN / "ansible-playbook"), "site.yml", "-i", INVENTORY],
                     run_env(config, Path(tempfile.mkdtemp(dir=work))), log)
    hosts = recap(log)
    result["tasks"] = sum(h["ok"] for h in hosts.values())
    # Every task a node evaluated, run or skipped: what the controller pays for.
    result["skipped"] = sum(h["skipped"] for h in hosts.values())
    bad = {h: r for h, r in hosts.items() if r["failed"] or r["unreachable"] or (require_noop and r["changed"])}
    if result["rc"] != 0 or len(hosts) != nodes or bad:
        raise NotANoOp(f"{name}: rc {result['rc']}, {len(hosts)} of {nodes} hosts in the recap, "
                       f"not clean: {bad} (see {log})")
    return result


def scan(config, work: Path, name: str) -> dict:
    out = Path(tempfile.mkdtemp(dir=work))
    log = CACHE / f"{name}.log"
    result = measure([str(BIN / "gpufleet"), "drift", "-i", INVENTORY, "--quiet", "--output-dir", str(out / "report"),
                      "--history", str(out / "history.jsonl")],
                     run_env(config, Path(tempfile.mkdtemp(dir=work))), log)
    if result["rc"] != 0:
        raise NotANoOp(f"{name}: drift exited {result['rc']} on a converged fleet (see {log})")
    report = json.loads((out / "report" / "report.json").read_text())
    result["resources"] = len(report["records"])
    result["coverage_percent"] = report["summary"]["coverage_percent"]
    return result


def lab_up(nodes: int) -> None:
    subprocess.run([str(BIN / "gpufleet"), "lab", "up", "-n", str(nodes)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def bench(sizes: list[int], which: list[str]) -> dict:
    CACHE.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        work = Path(tmp)
        cfg = configs(work)
        for n in sizes:
            print(f"== {n} node(s): lab up, converge", flush=True)
            lab_up(n)
            setup = converge(cfg["gpufleet"], work, f"converge-{n}", n, require_noop=False)
            row = {"nodes": n, "first_converge": setup}
            for name in which:
                for kind, run in (("noop", lambda c, t: converge(c, work, t, n, require_noop=True)),
                                  ("drift", lambda c, t: scan(c, work, t))):
                    tag = f"{kind}-{name}-{n}"
                    row[f"{kind}_{name}"] = figures = run(cfg[name], tag)
                    print(f"   {tag}: {figures['wall']} s wall, {figures['cpu']} s CPU", flush=True)
            rows.append(row)
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
            "python": platform.python_version(), "ansible_core": ansible_version(), "configs": which,
            "rows": rows}


def ansible_version() -> str:
    from ansible.release import __version__
    return __version__


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def markdown(results: dict) -> str:
    rows, which = results["rows"], results["configs"]
    lines = [
        "# Fleet benchmark", "",
        f"`make bench-fleet` (python -m bench.fleet), {results['when']}, one run.",
        f"Machine: {results['cpus']} CPUs, Python {results['python']}, ansible-core {results['ansible_core']}.",
        "Lab nodes are podman containers on the same machine, so the nodes' work shares its CPUs too.", "",
        "Wall and controller CPU (ansible-playbook and its workers, user + system) of one process,",
        "measured with wait4. Every measured run starts without SSH connections open.", "",
        "| nodes | run | config | wall s | CPU s | tasks ok / resources | tasks skipped |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        first = row["first_converge"]
        lines.append(f"| {row['nodes']} | converge (brings new nodes up) | gpufleet | {first['wall']} | {first['cpu']} "
                     f"| {first['tasks']} | {first.get('skipped', '-')} |")
        for kind, label in (("noop", "no-op converge"), ("drift", "drift scan")):
            for name in which:
                f = row[f"{kind}_{name}"]
                count = f.get("tasks", f.get("resources", "-"))
                lines.append(f"| {row['nodes']} | {label} | {name} | {f['wall']} | {f['cpu']} | {count} "
                             f"| {f.get('skipped', '-')} |")
    for slow, fast in (("defaults", "gpufleet"), ("defaults", "linear"), ("linear", "gpufleet")):
        if slow in which and fast in which:
            lines += ["", f"## {slow} / {fast} (wall, same run)", ""]
            for row in rows:
                lines.append(f"- {row['nodes']} node(s): no-op converge "
                             f"{ratio(row[f'noop_{slow}']['wall'], row[f'noop_{fast}']['wall'])}, drift scan "
                             f"{ratio(row[f'drift_{slow}']['wall'], row[f'drift_{fast}']['wall'])}")
    first = rows[0]
    lines += ["", f"## Scaling: wall at N nodes / wall at {first['nodes']} node(s)", ""]
    for name in which:
        for row in rows[1:]:
            lines.append(f"- {name}, {row['nodes']} nodes: no-op converge "
                         f"{ratio(row[f'noop_{name}']['wall'], first[f'noop_{name}']['wall'])}, drift scan "
                         f"{ratio(row[f'drift_{name}']['wall'], first[f'drift_{name}']['wall'])}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", default="1,4,8", help="lab sizes, comma-separated (default 1,4,8)")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"some of {', '.join(CONFIGS)}, comma-separated (default all)")
    parser.add_argument("--output", type=Path, default=HERE, help="folder for results.md and results.json")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    which = [c for c in args.configs.split(",") if c]
    if not sizes or any(n < 1 for n in sizes) or sorted(sizes) != sizes:
        parser.error(f"--nodes: ascending positive sizes, got {args.nodes!r}")
    if not which or set(which) - set(CONFIGS):
        parser.error(f"--configs: some of {', '.join(CONFIGS)}, got {args.configs!r}")
    try:
        results = bench(sizes, which)
    except NotANoOp as error:
        print(f"bench-fleet: {error}", file=sys.stderr)
        return 1
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
