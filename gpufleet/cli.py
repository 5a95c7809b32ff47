"""The `gpufleet` command line."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

from .drift import _command as drift_command
from .lab import Lab, PodmanError


def project_root(start: Path | None = None) -> Path:
    """The checkout that holds galaxy.yml, searched upward from `start`."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "galaxy.yml").is_file():
            return d
    return here


def lab_dir() -> Path:
    env = os.environ.get("GPUFLEET_LAB_DIR")
    return Path(env) if env else project_root() / ".lab"


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
    """The installed gpufleet's version, as pip knows it."""
    try:
        return metadata.version("gpufleet")
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

    lab = sub.add_parser("lab", help="the local lab fleet of podman nodes")
    lab_sub = lab.add_subparsers(dest="action", required=True)
    up = lab_sub.add_parser("up", help="start the lab nodes (idempotent)")
    up.add_argument("-n", "--nodes", type=_at_least(1), default=3, help="number of nodes (default 3)")
    up.add_argument("--debian", choices=["12", "13"], default="12", help="Debian release of the nodes (default 12)")
    up.add_argument("--gpu-stack", type=_at_least(0), default=0, metavar="K",
                    help="make the last K nodes GPU-stack nodes: Debian 13, privileged, site.yml's GPU stack from "
                         "Debian's packages (default 0)")
    lab_sub.add_parser("down", help="remove every lab node")
    lab_sub.add_parser("status", help="list the lab nodes")

    drift_command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "drift":
        return drift_command.run(project_root(), args)
    if args.command == "lab":
        lab = Lab(lab_dir(), root=project_root())
        try:
            if args.action == "up":
                lab.up(count=args.nodes, debian=args.debian, gpu_stack=args.gpu_stack)
            elif args.action == "down":
                lab.down()
            else:
                rows = lab.status()
                if not rows:
                    print("lab: no nodes")
                for r in rows:
                    print(f"{r['name']:<18} {r['endpoint']:<18} {r['state']:<10} ssh {r['ssh']}")
        except (PodmanError, TimeoutError, ValueError, RuntimeError) as exc:
            print(f"gpufleet lab {args.action}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
