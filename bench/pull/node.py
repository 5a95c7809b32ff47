"""One node's pull-mode check run against the push scan of the same node:
``make bench-pull-node`` (python -m bench.pull.node).

A fresh lab of one node (``gpufleet lab down``, then ``gpufleet lab up
-n 1``), converged from here by site.yml (push). Then pull mode is set up on it as a fleet would
(playbooks/pull.yml through the lab inventory):

- the repository is this checkout's files as they are, with the pinned
  collections (.collections) committed into the copy, as a bare repository
  on the node (tests/support/pull.py): the node cannot reach Galaxy;
- ansible-core in the node's virtual environment (the ansible package
  would bring the same collections, in 54 MB);
- check mode, the lab's group variables as ``pull_site_extra_vars`` (a
  pull run sees no inventory), the report uploaded to the lab's object
  store with the backups' credentials;
- the timer far off, so only the measured runs run.

Then, ROUNDS times, one after the other on the same converged node:

- ``push``: ``gpufleet drift -i inventories/lab`` from this machine;
- ``pull``: the node's own run, ``systemctl start gpufleet-pull.service``
  (a oneshot: it returns when the run has ended), through Mitogen (the
  role puts it in the run's virtual environment, and the repository's
  ansible.cfg names the strategy gpufleet.cloud.mitogen_linear);
- ``pull, no Mitogen``: the same run with Ansible's own linear strategy
  (ANSIBLE_STRATEGY from a runtime drop-in of the unit), as pull mode ran
  before Mitogen was in its environment.

Each is timed from the outside: wall, and the machine's busy CPU-seconds
(/proc/stat: the node's processes are this machine's, so both ways count
everything they cost, wherever it ran: run it on a quiet machine). The
push scan's controller CPU (wait4 of its process tree) is given apart.
Each run's report is read back: the push scan's report.json, and the pull
run's report from the node and from the store (``gpufleet drift --from``),
and the benchmark stops when either finds the converged node out of sync
or reads less than the other. Figures go to bench/pull/node-results.md and
node-results.json. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.fleet.__main__ import BIN, CACHE, INVENTORY, NotANoOp, configs, converge, lab_up, measure, run_env
from bench.interpreter.__main__ import with_busy_cpu
from gpufleet.lab import _nodes, _object_store
from tests.support import pull as pull_mode
from tests.support.nodes import ROOT

HERE = Path(__file__).resolve().parent
NODE = _nodes.node(1)


def node_exec(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["podman", "exec", NODE.name, *argv], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NotANoOp(f"on {NODE.name}: {' '.join(argv)} exited {result.returncode}: {result.stderr[-2000:]}")
    return result


def set_up_pull(work: Path, config, site: dict) -> dict:
    """Pull mode on the node through playbooks/pull.yml; its figures."""
    pull_mode.trust_host_cas(NODE.name)
    pull_mode.install_repository(NODE.name, pull_mode.repository(work))
    extra = work / "pull-vars.json"
    extra.write_text(json.dumps(pull_mode.pull_vars(site)))
    log = work / "pull-setup.log"
    result = measure([str(BIN / "ansible-playbook"), "playbooks/pull.yml", "-i", INVENTORY, "-e", f"@{extra}"],
                     run_env(config, Path(tempfile.mkdtemp(dir=work))), log)
    if result["rc"] != 0:
        raise NotANoOp(f"playbooks/pull.yml exited {result['rc']}:\n{log.read_text()[-4000:]}")
    return result


def summary(report: dict) -> dict:
    """Resources, their states and the exit bitmask of a report: the
    command's (its summary) or a node's (the callback's, at the top)."""
    states: dict[str, int] = {}
    for record in report["records"]:
        states[record["state"]] = states.get(record["state"], 0) + 1
    exit_code = report["summary"]["exit_code"] if "summary" in report else report["exit_code"]
    # Which resources were read, so two reports can be held to the same set.
    names = "\n".join(sorted(record["resource"] for record in report["records"]))
    return {"resources": len(report["records"]), "states": states, "exit_code": exit_code,
            "resources_sha256": hashlib.sha256(names.encode()).hexdigest()}


def push(work: Path, config, n: int) -> dict:
    def run():
        out = work / f"push-{n}"
        result = measure([str(BIN / "gpufleet"), "drift", "-i", INVENTORY, "--quiet",
                          "--output-dir", str(out), "--history", str(out / "history.jsonl")],
                         run_env(config, Path(tempfile.mkdtemp(dir=work))), work / f"push-{n}.log")
        report = out / "report.json"
        if not report.exists():
            raise NotANoOp(f"the push scan wrote no report (exit {result['rc']}; see {work / f'push-{n}.log'})")
        return {"rc": result["rc"], "controller_cpu": result["cpu"], **summary(json.loads(report.read_text()))}
    return with_busy_cpu(run)


LINEAR_DROPIN = "/run/systemd/system/gpufleet-pull.service.d/bench-linear.conf"


def use_mitogen(mitogen: bool) -> None:
    """The unit as the role made it, or with Ansible's linear strategy."""
    dropin = "" if mitogen else "[Service]\nEnvironment=ANSIBLE_STRATEGY=ansible.builtin.linear\n"
    node_exec("sh", "-c", f"mkdir -p {os.path.dirname(LINEAR_DROPIN)} && rm -f {LINEAR_DROPIN}"
              + (f" && printf '{dropin}' > {LINEAR_DROPIN}" if dropin else "") + " && systemctl daemon-reload")


def pull(n: int, mitogen: bool = True) -> dict:
    """One pull run of round `n`; without Mitogen, Ansible's linear strategy."""
    use_mitogen(mitogen)

    def run():
        # No report from an earlier round can stand in for this one's.
        node_exec("rm", "-f", pull_mode.REPORT)
        result = node_exec("systemctl", "start", "gpufleet-pull.service", check=False)
        report = node_exec("cat", pull_mode.REPORT, check=False)
        if report.returncode != 0:
            journal = node_exec("journalctl", "-u", "gpufleet-pull.service", "-n", "60", "--no-pager", check=False)
            raise NotANoOp(f"pull run {n}: no report on the node (systemctl exited {result.returncode}):\n"
                           f"{journal.stdout}")
        return {"rc": result.returncode, **summary(json.loads(report.stdout))}
    return with_busy_cpu(run)


def from_store(work: Path, site: dict) -> dict:
    """`gpufleet drift --from` over the lab's store, with the backups'
    bucket and credentials: what the fleet sees."""
    out = work / "from-store"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": site["backup_s3_access_key_id"],
           "AWS_SECRET_ACCESS_KEY": site["backup_s3_secret_access_key"]}
    bucket = site["backup_repository_bucket"]
    result = subprocess.run([str(BIN / "gpufleet"), "drift", "-i", INVENTORY, "--from", f"s3://{bucket}/{pull_mode.PREFIX}",
                             "--endpoint", f"http://{gateway()}:{_object_store.PORT}", "--region", "us-east-1",
                             "--quiet", "--output-dir", str(out), "--history", str(out / "history.jsonl")],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    report = out / "report.json"
    if not report.exists():
        raise NotANoOp(f"gpufleet drift --from wrote no report (exit {result.returncode}): {result.stderr[-2000:]}")
    return {"rc": result.returncode, **summary(json.loads(report.read_text()))}


def gateway() -> str:
    from gpufleet.lab._podman import Podman

    return Podman().bridge_gateway()


def median(rows: list[dict], key: str) -> float:
    return statistics.median_high(row[key] for row in rows)


def check_same(push_row: dict, pull_row: dict, what: str) -> None:
    """Both ways must read the same resources of a converged node, all in sync."""
    for name, row in (("push", push_row), (what, pull_row)):
        if row["rc"] != 0 or set(row["states"]) != {"in-sync"}:
            raise NotANoOp(f"{name}: exit {row['rc']}, states {row['states']} on the converged node")
    if push_row["resources"] != pull_row["resources"]:
        raise NotANoOp(f"push read {push_row['resources']} resources, {what} {pull_row['resources']}")
    if push_row["resources_sha256"] != pull_row["resources_sha256"]:
        raise NotANoOp(f"push and {what} read as many resources, but not the same ones")


def bench(rounds: int) -> dict:
    CACHE.mkdir(parents=True, exist_ok=True)  # the converge's log (bench.fleet's)
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-pull-node-") as tmp:
        work = Path(tmp)
        print("== lab down, lab up -n 1, converge (push)", flush=True)
        # A fresh node, so the first converge and pull mode's setup are
        # what a new node costs.
        subprocess.run([str(BIN / "gpufleet"), "lab", "down"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        lab_up(1)
        # gpufleet's own ansible.cfg (bench.fleet's "gpufleet" config).
        config = configs(work)["gpufleet"]
        first = converge(config, work, "pull-node-converge", 1, require_noop=False)
        print("== pull mode on the node (playbooks/pull.yml)", flush=True)
        site = pull_mode.site_vars(NODE.hostname)
        setup = set_up_pull(work, config, site)
        rows = {"push": [], "pull": [], "pull_linear": []}
        for n in range(rounds):
            rows["push"].append(push(work, config, n))
            rows["pull"].append(pull(n))
            check_same(rows["push"][-1], rows["pull"][-1], "pull")
            rows["pull_linear"].append(pull(n, mitogen=False))
            check_same(rows["push"][-1], rows["pull_linear"][-1], "pull without Mitogen")
            print(f"   round {n + 1}: push {rows['push'][-1]['wall']} s, pull {rows['pull'][-1]['wall']} s, "
                  f"without Mitogen {rows['pull_linear'][-1]['wall']} s", flush=True)
        use_mitogen(True)
        store = from_store(work, site)
        check_same(rows["push"][-1], store, "drift --from")
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(), "rounds": rounds,
            "first_converge": first, "pull_setup": setup, "push": rows["push"], "pull": rows["pull"],
            "pull_linear": rows["pull_linear"],
            "from_store": store}


def ratio(rows: list[dict], against: list[dict], key: str) -> str:
    return f"{median(rows, key) / median(against, key):.2f}"


def markdown(results: dict) -> str:
    push_rows, pull_rows, linear_rows = results["push"], results["pull"], results["pull_linear"]
    resources = push_rows[0]["resources"]
    lines = [
        "# One node's pull-mode check run against the push scan",
        "",
        f"`python -m bench.pull.node --rounds {results['rounds']}` ({results['when']}, {results['cpus']} CPUs): the",
        "lab at one node, converged by site.yml; then, on that node, the push scan (`gpufleet drift -i",
        "inventories/lab`) and the node's own check-mode pull run (`systemctl start gpufleet-pull.service`),",
        f"one after the other, each round. Both read the same {resources} resources, all in sync; the",
        "store's merge (`gpufleet drift --from`) found the same. The pull run goes through Mitogen, as",
        "the role sets it up, and once more with Ansible's linear strategy (no Mitogen), as pull mode ran",
        "before. The median of the rounds, in seconds: wall, and the machine's busy CPU (the node's",
        "processes included).",
        "",
        "| | wall | busy CPU | controller CPU |",
        "|---|---:|---:|---:|",
        f"| push | {median(push_rows, 'wall'):.1f} | {median(push_rows, 'busy_cpu'):.1f} | "
        f"{median(push_rows, 'controller_cpu'):.1f} |",
        f"| pull | {median(pull_rows, 'wall'):.1f} | {median(pull_rows, 'busy_cpu'):.1f} | 0 |",
        f"| pull, no Mitogen | {median(linear_rows, 'wall'):.1f} | {median(linear_rows, 'busy_cpu'):.1f} | 0 |",
        f"| pull / push | {ratio(pull_rows, push_rows, 'wall')} | {ratio(pull_rows, push_rows, 'busy_cpu')} | |",
        f"| no Mitogen / Mitogen | {ratio(linear_rows, pull_rows, 'wall')} | "
        f"{ratio(linear_rows, pull_rows, 'busy_cpu')} | |",
        "",
        "Setting up pull mode on the node (playbooks/pull.yml: git, a virtual environment with ansible-core,",
        f"Mitogen and boto3, the script and the timer): {results['pull_setup']['wall']:.1f} s wall,",
        f"{results['pull_setup']['cpu']:.1f} s of controller CPU. The first converge:",
        f"{results['first_converge']['wall']:.1f} s wall.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        results = bench(args.rounds)
    except NotANoOp as exc:
        print(f"bench-pull-node: {exc}", file=sys.stderr)
        return 1
    (HERE / "node-results.json").write_text(json.dumps(results, indent=1) + "\n")
    text = markdown(results)
    (HERE / "node-results.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
