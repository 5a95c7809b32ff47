# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What the guard daemon reads on the node each poll: GPU utilisation, the
activity sources, the boot and the job's running time. Each read returns
None when it cannot be done, which the triggers count as active (never as
idle) and report as unknown. The standard library and the node-side
library only."""

from __future__ import annotations

import os
import time

import gpufleet_process as process
from gpufleet_nvidia_smi import query_gpus

ACTIVE_STATES = {"active", "activating", "deactivating", "reloading", "refreshing"}
INACTIVE_STATES = {"inactive", "failed"}
SSH_PORT_HEX = "0016"  # 22
TCP_ESTABLISHED = "01"


def gpu_utilization(nvidia_smi: str, timeout: float = 20.0) -> list[float | None] | None:
    """One percentage per GPU, None for a GPU that says [N/A]; None for all
    when nvidia-smi is missing, fails, hangs or prints nothing it can read."""
    status, _detail, rows = query_gpus(nvidia_smi, ["utilization.gpu"], timeout)
    if status != "ok":
        return None
    values: list[float | None] = []
    for row in rows:
        try:
            value = float(row["utilization.gpu"])
        except ValueError:
            values.append(None)  # [N/A], [Unknown Error]
            continue
        values.append(value if 0 <= value <= 100 else None)
    return values


def unit_active(unit: str) -> bool | None:
    state = process.run(["systemctl", "is-active", unit], 10).stdout.strip()
    if state in ACTIVE_STATES:
        return True
    if state in INACTIVE_STATES:
        return False
    return None


def ssh_sessions(proc_net: str = "/proc/net") -> bool | None:
    """Whether an SSH connection is established to this node: read from the
    kernel's socket tables, so it does not depend on logind or utmp."""
    seen = False
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc_net, name), encoding="ascii") as handle:
                lines = handle.read().splitlines()[1:]
        except FileNotFoundError:
            continue  # no IPv6 in this kernel
        except OSError:
            return None
        seen = True
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[1].rsplit(":", 1)[-1] == SSH_PORT_HEX and fields[3] == TCP_ESTABLISHED:
                return True
    return False if seen else None


def file_touched(path: str, within_seconds: float, now: float) -> bool | None:
    """The job's activity file: touched within the window is active, a file
    that does not exist is not; a file that cannot be read is unknown."""
    try:
        return now - os.stat(path).st_mtime <= within_seconds
    except FileNotFoundError:
        return False
    except OSError:
        return None


def boot(proc: str = "/proc", container_marker: str = "/run/systemd/container") -> tuple[str, float] | None:
    """(boot id, uptime in seconds) of this system, or None. The kernel's,
    except in a container (systemd writes ``container_marker`` there):
    there the container's start is its boot, which the kernel's boot id
    and uptime do not show, so its init's (PID 1's) start stands in: the
    id gets the start appended, and the uptime is init's age. A reboot of
    a container through its cloud's or its engine's API is then a boot to
    the repair ladder as on a VM."""
    try:
        with open(os.path.join(proc, "sys/kernel/random/boot_id"), encoding="ascii") as handle:
            boot_id = handle.read().strip()
        with open(os.path.join(proc, "uptime"), encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        if not os.path.exists(container_marker):
            return boot_id, uptime
        with open(os.path.join(proc, "1/stat"), encoding="ascii") as handle:
            # starttime, field 22, in clock ticks since the kernel booted;
            # the fields after the command's closing parenthesis start at 3.
            started = int(handle.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None
    return f"{boot_id}-{started}", max(uptime - started / os.sysconf("SC_CLK_TCK"), 0.0)


def job_seconds(unit: str, monotonic=time.monotonic) -> float | None:
    """How long the job unit has been active, from systemd's own record of
    when it entered that state; None when it is not active or unreadable."""
    done = process.run(["systemctl", "show", "--property=ActiveState,ActiveEnterTimestampMonotonic", unit], 10)
    if done.rc != 0:
        return None
    props = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    try:
        entered = int(props.get("ActiveEnterTimestampMonotonic", ""))
    except ValueError:
        return None
    if props.get("ActiveState") != "active" or entered <= 0:
        return None
    return max(monotonic() - entered / 1e6, 0.0)
