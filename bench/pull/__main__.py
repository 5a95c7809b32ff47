"""Fleet drift from pull-mode reports at scale: ``make bench-pull``
(python -m bench.pull [--nodes 10000]).

NODES synthetic node reports, each a lab node's (bench/pull/node_report.json:
lab-node-1's report from `make demo`, 107 records) under its own name, with
drift on one node in fifty, are put into moto's S3 server, which runs as a
process of its own (tests/emulators/s3_server.py): its CPU is not ours.
Then, in a fresh process (so its peak memory is the merge's alone),
`gpufleet drift --from`'s own steps run one after another, each timed with
wall, CPU (user and system, threads included) and the peak resident memory
so far:

- ``fetch``: list the prefix and read every report (_store.fetch, 32 threads);
- ``merge``: parse, check and merge against an inventory of the same nodes,
  one in a hundred missing and one in a hundred stale (_store.merge);
- ``write``: report.json, report.xml and report.html, as the command writes.

The push scan's cost per node comes from `make bench-fleet`'s last results
(bench/fleet/results.json), in the same table. Figures go to
bench/pull/results.md and results.json. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BUCKET = "gpufleet-bench"
PREFIX = "gpufleet/drift"
# Reports put side by side; moto answers one request at a time per thread.
PUT_THREADS = 16


def node_name(i: int) -> str:
    return f"gpu-node-{i:05d}"


def reports(template: dict, nodes: int, now: datetime.datetime):
    """(name, report text) of every node but the missing ones: one in fifty
    drifted, one in a hundred stale, one in a hundred missing."""
    (old_host,) = template["hosts"]
    for i in range(nodes):
        if i % 100 == 1:
            continue  # missing
        report = copy.deepcopy(template)
        name = node_name(i)
        report["hosts"] = {name: report["hosts"][old_host]}
        finished = now - datetime.timedelta(hours=6 if i % 100 == 2 else 0, minutes=i % 30)
        report["finished"] = finished.isoformat()
        report["started"] = (finished - datetime.timedelta(minutes=2)).isoformat()
        for record in report["records"]:
            record["host"] = name
        if i % 50 == 3:
            record = report["records"][i % len(report["records"])]
            record["state"] = "drifted"
            record["diff"] = [{"before": "MaxAuthTries 3\n", "after": f"MaxAuthTries {i % 9}\n",
                               "before_header": "/etc/ssh/sshd_config.d/50-gpufleet.conf",
                               "after_header": "/etc/ssh/sshd_config.d/50-gpufleet.conf"}]
            report["exit_code"] = 2
        yield name, json.dumps(report, indent=1, sort_keys=True)


def usage() -> dict:
    self = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": self.ru_utime + self.ru_stime, "peak_mib": self.ru_maxrss / 1024}


def measure(port: int, nodes: int, out: Path) -> dict:
    """The command's steps in this (fresh) process."""
    from gpufleet.drift import _command, _store  # pylint: disable=import-outside-toplevel

    client = _store.client(f"http://127.0.0.1:{port}", "us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing-secret")
    inventory = {node_name(i): {"provider": "aliyun", "region": "cn-hangzhou", "gpu_model": "A10",
                                "groups": ["lab"], "versions": {}} for i in range(nodes)}
    steps = {}
    before, started = usage(), time.monotonic()

    def step(name):
        nonlocal before, started
        now = usage()
        steps[name] = {"wall": round(time.monotonic() - started, 2), "cpu": round(now["cpu"] - before["cpu"], 2),
                       "peak_mib": round(now["peak_mib"])}
        before, started = now, time.monotonic()

    fetched = _store.fetch(client, BUCKET, PREFIX)
    fetched_mib = round(sum(len(f.text or "") for f in fetched.values()) / 2**20, 1)
    step("fetch")
    report = _store.merge(fetched, inventory, f"s3://{BUCKET}/{PREFIX}", datetime.timedelta(minutes=90))
    step("merge")
    _command._write(report, out)  # pylint: disable=protected-access
    step("write")
    return {"steps": steps, "hosts": len(report.hosts), "records": len(report.records),
            "not_reported": len(report.not_reported()), "drifted_hosts": len(report.drifted_hosts()),
            "exit_code": report.exit_code(), "fetched_mib": fetched_mib}


def push_per_node() -> dict | None:
    """The push scan's controller cost per node, from bench-fleet's results."""
    path = ROOT / "bench" / "fleet" / "results.json"
    if not path.is_file():
        return None
    results = json.loads(path.read_text())
    rows = [r for r in results["rows"] if r.get("drift_gpufleet", {}).get("rc") == 0]
    if not rows:
        return None
    row = max(rows, key=lambda r: r["nodes"])
    scan = row["drift_gpufleet"]
    return {"nodes": row["nodes"], "when": results["when"], "cpu": scan["cpu"], "wall": scan["wall"],
            "cpu_per_node": round(scan["cpu"] / row["nodes"], 2), "wall_per_node": round(scan["wall"] / row["nodes"], 2)}


def run(nodes: int) -> dict:
    template = json.loads((HERE / "node_report.json").read_text())
    sys.path.insert(0, str(ROOT))
    from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel

    from tests.emulators import s3_server  # pylint: disable=import-outside-toplevel
    from tests.support.ports import free_port  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory(prefix="bench-pull-") as work:
        port, pidfile = free_port(), Path(work) / "s3.pid"
        subprocess.run([sys.executable, str(ROOT / "tests" / "emulators" / "s3_server.py"), "--port", str(port),
                        "--pidfile", str(pidfile), "--bucket", BUCKET], check=True)
        try:
            client = s3_server.client(port)
            now = datetime.datetime.now(datetime.timezone.utc)
            started = time.monotonic()
            with ThreadPoolExecutor(PUT_THREADS) as pool:
                list(pool.map(lambda item: client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{item[0]}.json",
                                                             Body=item[1].encode()), reports(template, nodes, now)))
            put_wall = round(time.monotonic() - started, 1)
            print(f"bench-pull: {nodes} reports put in {put_wall} s", flush=True)
            done = subprocess.run([sys.executable, "-m", "bench.pull", "--measure", str(port), "--nodes", str(nodes),
                                   "--out", str(Path(work) / "out")], cwd=ROOT, capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                raise SystemExit(f"bench-pull: the measurement failed:\n{done.stdout}{done.stderr}")
            measured = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            subprocess.run([sys.executable, str(ROOT / "tests" / "emulators" / "s3_server.py"), "--stop",
                            "--pidfile", str(pidfile)], check=False)
    return {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "nodes": nodes, "report_bytes": len(json.dumps(template, indent=1)),
            "records_per_report": len(template["records"]), "put_wall": put_wall, **measured,
            "push": push_per_node()}


def markdown(results: dict) -> str:
    steps = results["steps"]
    merge = steps["merge"]
    lines = [
        "# Fleet drift from pull-mode reports",
        "",
        f"`python -m bench.pull --nodes {results['nodes']}` ({results['when']}, {results['cpus']} CPUs, "
        f"Python {results['python']}): {results['nodes']} node reports of {results['records_per_report']} records "
        f"({results['report_bytes'] // 1024} KiB each, {results['fetched_mib']} MiB in all) in moto's S3 server "
        f"(its own process), merged by `gpufleet drift --from`'s steps in a fresh process. Put: "
        f"{results['put_wall']} s.",
        "",
        "| step | wall s | CPU s | peak resident MiB (so far) |",
        "|---|---:|---:|---:|",
    ]
    for name in ("fetch", "merge", "write"):
        s = steps[name]
        lines.append(f"| {name} | {s['wall']} | {s['cpu']} | {s['peak_mib']} |")
    lines += [
        "",
        f"The merged report: {results['hosts']} hosts, {results['records']} records, {results['not_reported']} "
        f"not reported (missing or stale), {results['drifted_hosts']} drifted, exit {results['exit_code']}.",
        f"Goal for the merge: at most 30 s and 1 GiB; measured {merge['wall']} s and "
        f"{steps['merge']['peak_mib']} MiB peak (fetch included, which the merge holds).",
    ]
    push = results.get("push")
    if push:
        pull_cpu = (steps["fetch"]["cpu"] + merge["cpu"] + steps["write"]["cpu"]) / results["nodes"]
        lines += [
            "",
            "The controller's CPU per node, against the push scan's from `make bench-fleet` "
            f"({push['when']}, {push['nodes']} nodes, `gpufleet drift` with the project's settings; "
            "another run, same machine type):",
            "",
            "| | controller CPU s per node |",
            "|---|---:|",
            f"| push scan (bench-fleet, {push['nodes']} nodes) | {push['cpu_per_node']} |",
            f"| pull reports: fetch + merge + write ({results['nodes']} nodes) | {pull_cpu:.4f} |",
            f"| ratio push / pull | {push['cpu_per_node'] / pull_cpu:.0f} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--measure", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.nodes, args.out)))
        return 0
    results = run(args.nodes)
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
