# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Writing node_exporter textfile-collector files, shared by the node-side
scripts of the monitoring and node_health roles.

Those roles copy this file next to their scripts on the node, as
gpufleet_textfile.py, so the scripts run from systemd timers without Ansible.
It uses the standard library only.
"""

from __future__ import annotations

import os
import tempfile


def escape(value: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_atomic(path: str, text: str) -> None:
    """Write next to the target and rename over it: readers (node_exporter,
    a monitoring agent) see the old file or the new one, never a partial one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
