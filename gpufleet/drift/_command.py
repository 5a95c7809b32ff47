"""`gpufleet drift`: scan, report, and optionally fix."""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import sys
from pathlib import Path

from . import _fix, _history, _peers, _runner, _store, _waivers
from .. import _ansible
from ._model import EXIT_FAILED, load_report
from ._render_html import html
from .. import _exit
from ._render_junit import junit_parts
from ._render_text import table

EXIT_USAGE = _exit.USAGE
# --from's default: three of the pull role's default 30-minute intervals.
MAX_AGE_MINUTES = 90

EPILOG = """\
exit status: a bitmask, so one run can report several things at once
  0   every resource of every host is in sync
  1   the command could not run as asked (a bad option; --fix without --yes
      where no terminal can answer)
  2   drift: a resource differs from what site.yml sets up
  4   failed: a task failed, or the scan produced no report
  8   unreachable: a host could not be reached
  16  with --from: a listed node's pull report is stale, missing or unreadable
  e.g. 10 = drift on one host and another host unreachable

examples:
  gpufleet drift -i inventories/aliyun
  gpufleet drift -i inventories/aliyun --limit 'gpu_a100' --tags baseline,security
  gpufleet drift -i inventories/aliyun --fix            # asks before converging
  gpufleet drift -i inventories/aliyun --fix --yes      # in a pipeline
  gpufleet drift -i inventories/aliyun --format json | jq .summary.exit_code
  gpufleet drift -i ~/.local/share/gpufleet/lab/inventory   # the lab, outside a checkout
  gpufleet drift -i inventories/aliyun --from s3://gpufleet-backup/gpufleet/drift \
      --endpoint https://oss-cn-hangzhou.aliyuncs.com  # pull-mode nodes' own reports, no scan

--from reads, instead of scanning, the report each pull-mode node uploads
after its check-mode run (gpufleet.cloud.pull: <prefix>/<node>.json, with
the backups' bucket and endpoint by default). The inventory says which
nodes there should be: one without a report is missing, one whose report is
older than --max-age is stale, and neither is ever in sync; a report for a
node the inventory does not list is shown apart. Credentials: the AWS SDK's
chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance
role), with the keys of the store's S3 API on the other clouds.

playbooks: a checkout's (galaxy.yml in the working directory or above), with
its ansible.cfg; outside one, the gpufleet.cloud collection installed on
Ansible's collection paths (ANSIBLE_COLLECTIONS_PATH, ~/.ansible/collections),
with the ansible.cfg it ships unless ANSIBLE_CONFIG names another.
"""


def add_parser(sub) -> None:
    p = sub.add_parser("drift", help="verify the fleet against site.yml (check and diff mode)",
                       description="Scan the fleet with site.yml in check and diff mode and report, per host and "
                                   "resource, what differs from what site.yml sets up.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-i", "--inventory", required=True, help="inventory path, e.g. inventories/aliyun")
    p.add_argument("--limit", help="only these hosts or groups (Ansible pattern)")
    p.add_argument("--tags", help="only these roles' tags, comma-separated")
    p.add_argument("--output-dir", type=Path, help="where to write report.json/.xml/.html "
                   "(default .gpufleet/drift/<time> in the checkout, or in the working directory outside one)")
    p.add_argument("--waivers", type=Path, help="waiver file (default drift-waivers.yml in the checkout, or in the "
                   "working directory outside one, if present)")
    p.add_argument("--history", type=Path, help="history store (default .gpufleet/drift-history.jsonl, beside the "
                   "reports' default)")
    p.add_argument("--fix", action="store_true", help="converge the drifted hosts' drifted roles, then scan again")
    p.add_argument("--yes", action="store_true", help="with --fix: do not ask for confirmation")
    p.add_argument("--quiet", action="store_true", help="no progress lines (a failed task is still named on stderr)")
    p.add_argument("--from", dest="source", metavar="S3_URL",
                   help="merge the pull-mode nodes' reports from s3://BUCKET/PREFIX instead of scanning")
    p.add_argument("--endpoint", help="with --from: the store's S3 API endpoint (OSS, COS, OBS, MinIO); "
                   "default AWS S3")
    p.add_argument("--region", help="with --from: the bucket's region (default: the SDK's, else us-east-1)")
    p.add_argument("--max-age", type=int, metavar="MINUTES",
                   help="with --from: a report older than this is stale (default 90: three of the pull role's "
                        "default 30-minute intervals)")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="what goes to stdout: the table (default), or for scripts one JSON object with the "
                        "summary and the report paths (progress lines are then off)")


def _can_ask() -> bool:
    """Whether a person can answer --fix's confirmation."""
    return sys.stdin is not None and sys.stdin.isatty()


def _build(root: Path, args, report_path: Path):
    report = load_report(report_path)
    _finish(root, args, report)
    return report


def _finish(root: Path, args, report) -> None:
    """Waivers, peers and history, the same for a scan and a merge."""
    waivers_file = args.waivers or (root / "drift-waivers.yml")
    if args.waivers or waivers_file.exists():
        _waivers.apply(report.records, _waivers.load(waivers_file))
    states = report.host_states()
    reachable = {h: m for h, m in report.hosts.items() if states[h] not in ("unreachable", *_store.PULL_STATES)}
    report.peers = _peers.compare(reachable, report.roles_by_host())
    _history.record(args.history or root / ".gpufleet" / "drift-history.jsonl", report)


def _write(report, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    # Written piece by piece: a fleet of 10,000 nodes has a million records.
    with (out_dir / "report.json").open("w", encoding="utf-8") as out:
        json.dump(report.to_dict(), out, indent=1, default=str)
        out.write("\n")
    with (out_dir / "report.xml").open("w", encoding="utf-8") as out:
        out.writelines(junit_parts(report))
        out.write("\n")
    (out_dir / "report.html").write_text(html(report))


def _from_problem(args) -> str | None:
    """What is wrong with the --from options, named; None when nothing."""
    if not args.source:
        given = [name for name, value in (("--endpoint", args.endpoint), ("--region", args.region),
                                          ("--max-age", args.max_age is not None)) if value]
        if given:
            return f"{' and '.join(given)} only apply with --from s3://BUCKET/PREFIX"
        return None
    for name, value in (("--fix", args.fix), ("--limit", args.limit), ("--tags", args.tags)):
        if value:
            return (f"{name} does not apply with --from: the reports are the nodes' own whole check-mode runs; "
                    "scan without --from to limit, tag or fix from here")
    if args.max_age is not None and args.max_age < 1:
        return f"--max-age {args.max_age}: give the minutes after which a report is stale, for example 90"
    if args.endpoint and not re.match(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?/?$", args.endpoint):
        return f"--endpoint {args.endpoint}: expected the URL of an S3 API, for example https://cos.ap-shanghai.myqcloud.com"
    try:
        _store.parse_url(args.source)
    except _store.StoreError as exc:
        return str(exc)
    return None


def _merge(root: Path, args, out_dir: Path, base: Path):
    """--from: the nodes' reports from the store, merged against the
    inventory's hosts; written and shown as a scan's report is."""
    listing, why = _ansible.list_inventory(root, args.inventory)
    if listing is None:
        print(f"gpufleet drift: --inventory {args.inventory}: ansible-inventory failed: {why}", file=sys.stderr)
        return None
    bucket, prefix = _store.parse_url(args.source)
    try:
        fetched = _store.fetch(_store.client(args.endpoint, args.region), bucket, prefix)
    except Exception as exc:  # pylint: disable=broad-except  # the SDK's errors, named with the store
        print(f"gpufleet drift: --from {args.source}: cannot list the reports: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return None
    max_age = MAX_AGE_MINUTES if args.max_age is None else args.max_age
    report = _store.merge(fetched, _store.inventory_meta(listing), args.source, datetime.timedelta(minutes=max_age))
    _finish(base, args, report)
    _write(report, out_dir)
    _show(report, args, out_dir)
    return report


def _scan(root: Path, args, out_dir: Path, base: Path):
    raw = out_dir / "callback.json"
    raw.unlink(missing_ok=True)
    rc, status = _runner.scan(root, args.inventory, raw, args.limit, args.tags, quiet=args.quiet)
    if not raw.exists():
        print(f"gpufleet drift: the scan produced no report (ansible-playbook rc {rc}, {status})", file=sys.stderr)
        return None
    report = _build(base, args, raw)
    if report.drifted():
        report.next_step = shlex.join(["gpufleet", "drift", "-i", args.inventory, "--limit",
                                       ",".join(report.drifted_hosts()), "--fix"])
    _write(report, out_dir)
    _show(report, args, out_dir)
    return report


def _show(report, args, out_dir: Path) -> None:
    if args.format == "json":
        reports = {kind: str(out_dir.resolve() / f"report.{kind}") for kind in ("json", "xml", "html")}
        print(json.dumps({"summary": report.to_dict()["summary"], "reports": reports}))
    else:
        print(table(report))
        print(f"reports: {out_dir}/report.json report.xml report.html")


def run(root: Path, args, workdir: Path | None = None) -> int:
    """Scan with the playbooks of the collection at `root` (a checkout, or
    an installed collection); reports, history and the default waiver file
    are in `workdir` (default: `root`, a checkout)."""
    base = workdir or root
    if not Path(args.inventory).exists():
        print(f"gpufleet drift: --inventory {args.inventory}: no such file or directory", file=sys.stderr)
        return EXIT_USAGE
    if args.waivers and not args.waivers.exists():
        print(f"gpufleet drift: --waivers {args.waivers}: no such file", file=sys.stderr)
        return EXIT_USAGE
    if args.fix and not args.yes and not _can_ask():
        print("gpufleet drift: --fix asks before it converges, and no terminal can answer: "
              "add --yes to converge without asking", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        args.quiet = True  # stdout carries only the JSON object
    problem = _from_problem(args)
    if problem:
        print(f"gpufleet drift: {problem}", file=sys.stderr)
        return EXIT_USAGE
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    out_dir = args.output_dir or base / ".gpufleet" / "drift" / stamp
    try:
        if args.source:
            report = _merge(root, args, out_dir, base)
            return EXIT_FAILED if report is None else report.exit_code()
        report = _scan(root, args, out_dir, base)
        if report is None:
            return EXIT_FAILED
        if not args.fix or not report.drifted():
            return report.exit_code()
        hosts, roles = report.drifted_hosts(), report.drifted_roles()
        print(f"fix: converge {', '.join(hosts)} for {', '.join(roles) or 'all roles'}",
              file=sys.stderr if args.format == "json" else sys.stdout)
        if not args.yes:
            answer = input("proceed? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("fix: cancelled")
                return report.exit_code()
        failures = _fix.Failures()
        rc, status = _runner.fix(root, args.inventory, hosts, roles, quiet=args.quiet, on_event=failures)
        stream = sys.stderr if args.format == "json" else sys.stdout
        print(f"fix: ansible-playbook rc {rc} ({status}); scanning again", file=stream)
        again = _scan(root, args, out_dir / "after-fix", base)
        if again is None:
            return EXIT_FAILED
        # The scan after says what the converge left, its report what was
        # repaired; a converge that failed is never an exit 0.
        again.fix = _fix.outcome(report, again, failures, rc)
        _write(again, out_dir / "after-fix")
        print("\n".join(_fix.lines(again.fix)), file=stream)
        return again.exit_code() | (EXIT_FAILED if rc != 0 else 0)
    except _waivers.WaiverError as exc:
        print(f"gpufleet drift: --waivers: {exc}", file=sys.stderr)
        return EXIT_USAGE
