"""One measured inventory run, in a process of its own.

    python -m bench.inventory.measure CONFIG REPORT.json

Runs what ``ansible-inventory -i CONFIG --list`` runs (through Ansible's own
CLI class) and writes the wall and CPU time of the inventory parse alone to
REPORT.json, with the process's peak RSS. The parent measures the whole
process (wall, CPU) with wait4, so the report separates Python and Ansible
start-up from the plugin's own work.

Peak RSS is VmHWM from /proc/self/status: wait4's ru_maxrss would report
at least the parent's size, because Linux carries the high-water mark of
the forked copy across exec.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(config, report):
    from ansible.cli.inventory import InventoryCLI
    from ansible.inventory.manager import InventoryManager

    parse = {}
    original = InventoryManager.parse_sources

    def timed(self, cache=False):
        wall, cpu = time.monotonic(), time.process_time()
        try:
            return original(self, cache)
        finally:
            parse["wall"] = time.monotonic() - wall
            parse["cpu"] = time.process_time() - cpu
            parse["hosts"] = len(self.get_hosts())

    InventoryManager.parse_sources = timed
    try:
        InventoryCLI.cli_executor(["ansible-inventory", "-i", config, "--list", "--output", os.devnull])
    except SystemExit as done:
        code = done.code
    else:
        code = 0
    with open(report, "w") as handle:
        json.dump({"rc": code, "parse_wall": parse.get("wall"), "parse_cpu": parse.get("cpu"),
                   "hosts": parse.get("hosts"), "peak_kib": peak_kib()}, handle)
    return code or 0


def peak_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
