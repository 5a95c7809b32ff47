"""The `gpufleet` command line."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from . import _exit, _project
from .guard import _command as guard_command
from .lab import Lab, PodmanError

# Why `gpufleet drift` cannot run, if it cannot.
_DRIFT_UNAVAILABLE = ""
try:
    from .drift import _command as drift_command
except ImportError as _exc:  # no gpufleet.cloud collection to read reports with
    # `gpufleet lab` and --help still work; `gpufleet drift` says what to
    # install (the message names it) instead of a traceback at start.
    drift_command = None
    _DRIFT_UNAVAILABLE = str(_exc)

LAB_DIR_HELP = ("The lab directory (its SSH key, known_hosts, inventory, servers' logs and data): $GPUFLEET_LAB_DIR; "
                "else <checkout>/.lab inside a checkout; else $XDG_DATA_HOME/gpufleet/lab "
                "(~/.local/share/gpufleet/lab)")


def project_root(start: Path | None = None) -> Path:
    """The checkout that holds galaxy.yml, searched upward from `start`;
    `start` itself outside one."""
    here = (start or Path.cwd()).resolve()
    return _project.find_checkout(here) or here


def lab_dir() -> Path:
    """Where the lab keeps its state (LAB_DIR_HELP)."""
    return _project.default_lab_dir(_project.find_checkout())


def _at_least(minimum: int):
    """An argparse type: a whole number no smaller than `minimum`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def version() -> str:
    """The installed gpufleet's version, as pip knows it, and where the
    package it runs is (as `pip --version` says): an installed CLI and a
    checkout's can both be on a machine."""
    try:
        return f"{metadata.version('gpufleet')} from {Path(__file__).resolve().parent}"
    except metadata.PackageNotFoundError:
        return "unknown (gpufleet is not installed: pip install it, e.g. `make venv`)"


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1: argparse's usual 2 would read as "drift" in the
    drift command's bitmask (0 clean, 2 drift, 4 failures, 8 unreachable)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gpufleet", description="Discover, bootstrap and drift-check GPU fleets.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    lab = sub.add_parser("lab", help="the local lab fleet of podman nodes",
                         description="The local lab fleet of podman nodes, discovered through an Alibaba Cloud "
                                     "emulator. `lab up` writes an inventory for it into the lab directory: "
                                     "`gpufleet drift -i <lab dir>/inventory` (or, in a checkout, "
                                     "-i inventories/lab). " + LAB_DIR_HELP + ".")
    lab_sub = lab.add_subparsers(dest="action", required=True)
    up = lab_sub.add_parser("up", help="start the lab nodes (idempotent)",
                            description="Start the lab nodes (idempotent) and write their inventory to "
                                        "<lab dir>/inventory. " + LAB_DIR_HELP + ". Outside a checkout it needs "
                                        "the gpufleet.cloud collection installed on Ansible's collection paths, "
                                        "whose inventories/lab it copies.")
    up.add_argument("-n", "--nodes", type=_at_least(1), default=3, help="number of nodes (default 3)")
    up.add_argument("--debian", choices=["12", "13"], default="12", help="Debian release of the nodes (default 12)")
    up.add_argument("--gpu-stack", type=_at_least(0), default=0, metavar="K",
                    help="make the first K nodes GPU-stack nodes: Debian 13, privileged, site.yml's GPU stack from "
                         "Debian's packages (default 0)")
    up.add_argument("--spot", type=_at_least(0), default=0, metavar="K",
                    help="list the last K nodes as spot instances in the lab's cloud, so that site.yml's guard "
                         "watches for their spot notice (default 0)")
    lab_sub.add_parser("down", help="remove every lab node")
    lab_sub.add_parser("status", help="list the lab nodes")

    if drift_command is not None:
        drift_command.add_parser(sub)
    else:
        sub.add_parser("drift", help="verify the fleet against site.yml (needs gpufleet.cloud)",
                       description=_DRIFT_UNAVAILABLE)
    guard_command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "drift" and drift_command is None:
        # Whatever its options: without the collection, none can work.
        print(f"gpufleet drift: {_DRIFT_UNAVAILABLE}", file=sys.stderr)
        return _exit.USAGE
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command in ("drift", "guard"):
        # Both run the collection's playbooks: a checkout's, or an installed one.
        try:
            project = _project.locate()
        except _project.CollectionNotFound as exc:
            print(f"gpufleet {args.command}: {exc}", file=sys.stderr)
            return _exit.USAGE
        if args.command == "guard":
            return guard_command.run(project.collection, args)
        return drift_command.run(project.collection, args, workdir=project.workdir)
    if args.command == "lab":
        directory = lab_dir()
        # The servers run from the checkout, or the lab directory outside
        # one: never a directory whose own gpufleet/ could shadow the
        # package this command runs.
        checkout = _project.find_checkout()
        lab = Lab(directory, root=checkout or directory)
        try:
            if args.action == "up":
                # Only `up` needs the collection: it copies its lab inventory.
                lab.inventory_source = _project.locate().collection / "inventories" / "lab"
                directory.mkdir(parents=True, exist_ok=True)
                lab.up(count=args.nodes, debian=args.debian, gpu_stack=args.gpu_stack, spot=args.spot)
            elif args.action == "down":
                lab.down()
            else:
                rows = lab.status()
                if not rows:
                    print("lab: no nodes")
                for r in rows:
                    print(f"{r['name']:<18} {r['endpoint']:<18} {r['state']:<10} ssh {r['ssh']}")
        except (PodmanError, TimeoutError, ValueError, RuntimeError) as exc:  # CollectionNotFound too
            print(f"gpufleet lab {args.action}: {exc}", file=sys.stderr)
            return _exit.USAGE
    return _exit.OK


if __name__ == "__main__":
    sys.exit(main())
