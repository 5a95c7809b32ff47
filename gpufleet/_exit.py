"""The exit statuses of every gpufleet subcommand: one bitmask, so one run
can say several things at once (10: drift on one host, another unreachable).

The drift bits are the collection's as well: its drift callback computes a
scan's status (plugins/plugin_utils/_drift.py), and a unit test keeps the
two equal. This module needs no collection, so the CLI's other commands
keep their statuses where it is not installed."""

from __future__ import annotations

OK = 0
# The command could not run as asked: a bad option, no collection, --fix
# without --yes where no terminal can answer, a lab that will not start.
USAGE = 1
# gpufleet drift: a resource differs from what site.yml sets up.
DRIFT = 2
# A node's check could not be done: a failed task or no drift report
# (drift), a guard not running or metrics that do not read (guard status).
FAILED = 4
# A node could not be reached.
UNREACHABLE = 8
