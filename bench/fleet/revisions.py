"""Two revisions of the collection side by side on one lab node:
``python -m bench.fleet.revisions --before <git rev>`` (make bench-revisions).

What a no-op converge of ``site.yml`` costs each revision on the same
converged lab node: the tasks the node evaluates (ok + skipped, what the
controller pays a templating pass and a result for) and the controller's
CPU time (ansible-playbook and its workers, wait4), and the machine's
busy CPU over the run (/proc/stat), which adds the node's side: the lab
node is a container on this machine. The old revision is
checked out into a temporary git worktree and runs with its own
ansible.cfg and roles against the same lab inventory; the runs alternate
(before, after, before, after, ...) so a busy machine weighs on both alike,
and the ratio is taken within this one run. Nothing is asserted about
time: the figures go to bench/fleet/revisions.md and revisions.json.

The lab must be up and converged (``gpufleet lab up -n 1`` and a converge);
the first run of each revision is a warm-up and must already be a no-op."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.fleet.__main__ import BIN, CACHE, HERE, INVENTORY, ROOT, NotANoOp, measure, recap, run_env


def worktree(rev: str, folder: Path) -> Path:
    """`rev` checked out at `folder`, with this checkout's pinned dependency
    collections (.collections is not in git)."""
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], cwd=ROOT, check=True,
                   capture_output=True)
    (folder / ".collections").symlink_to(ROOT / ".collections")
    return folder


def noop(tree: Path, work: Path, name: str) -> dict:
    log = CACHE / f"revisions-{name}.log"
    env = run_env((tree / "ansible.cfg", {}), Path(tempfile.mkdtemp(dir=work)))
    result = measure([str(BIN / "ansible-playbook"), str(tree / "site.yml"), "-i", str(ROOT / INVENTORY)], env, log)
    hosts = recap(log)
    if result["rc"] != 0 or not hosts or any(h["changed"] or h["failed"] or h["unreachable"] for h in hosts.values()):
        raise NotANoOp(f"{name}: rc {result['rc']}, recap {hosts} (see {log})")
    result["evaluated"] = sum(h["ok"] + h["skipped"] for h in hosts.values())
    result["ok"] = sum(h["ok"] for h in hosts.values())
    result["skipped"] = sum(h["skipped"] for h in hosts.values())
    result["nodes"] = len(hosts)
    return result


def compare(before: str, rounds: int) -> dict:
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpufleet-revisions-") as tmp:
        work = Path(tmp)
        old = worktree(before, work / "before")
        try:
            trees = {"before": old, "after": ROOT}
            for name, tree in trees.items():  # warm-up: SSH keys known, caches filled
                noop(tree, work, f"{name}-warmup")
            runs = {"before": [], "after": []}
            for i in range(rounds):
                for name, tree in trees.items():
                    runs[name].append(noop(tree, work, f"{name}-{i}"))
                    print(f"   {name} {i}: {runs[name][-1]}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    summary = {name: {"evaluated": r[0]["evaluated"], "ok": r[0]["ok"], "skipped": r[0]["skipped"],
                      "nodes": r[0]["nodes"],
                      "cpu_median": round(statistics.median(x["cpu"] for x in r), 2),
                      "busy_cpu_median": round(statistics.median(x["busy_cpu"] for x in r), 2),
                      "wall_median": round(statistics.median(x["wall"] for x in r), 2)} for name, r in runs.items()}
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "before": before, "after": head,
            "rounds": rounds, "summary": summary, "runs": runs}


def markdown(results: dict) -> str:
    s = results["summary"]
    b, a = s["before"], s["after"]
    lines = [
        "# Two revisions, one lab node", "",
        f"`python -m bench.fleet.revisions --before {results['before']}`, {results['when']}, one run: "
        f"{results['rounds']} alternating no-op converges of each revision (after a warm-up of each), medians.", "",
        "| revision | nodes | tasks evaluated | ok | skipped | controller CPU s | machine CPU s | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| before ({results['before']}) | {b['nodes']} | {b['evaluated']} | {b['ok']} | {b['skipped']} "
        f"| {b['cpu_median']} | {b['busy_cpu_median']} | {b['wall_median']} |",
        f"| after ({results['after']}) | {a['nodes']} | {a['evaluated']} | {a['ok']} | {a['skipped']} "
        f"| {a['cpu_median']} | {a['busy_cpu_median']} | {a['wall_median']} |",
        "",
        f"- tasks evaluated, after / before: {a['evaluated'] / b['evaluated']:.2f}",
        f"- controller CPU, after / before: {a['cpu_median'] / b['cpu_median']:.2f}",
        f"- machine CPU (the node's side too), after / before: {a['busy_cpu_median'] / b['busy_cpu_median']:.2f}",
        f"- wall, after / before: {a['wall_median'] / b['wall_median']:.2f}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet.revisions", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--before", required=True, help="the git revision to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=3, help="measured runs of each revision (default 3)")
    parser.add_argument("--output", type=Path, default=HERE, help="folder for revisions.md and revisions.json")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds: at least 1, got {args.rounds}")
    try:
        results = compare(args.before, args.rounds)
    except NotANoOp as error:
        print(f"bench-revisions: {error}", file=sys.stderr)
        return 1
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "revisions.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output / "revisions.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
