# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""One ansible-pull run, installed by gpufleet.cloud.pull and started by
gpufleet-pull.timer.

    python3 gpufleet-pull.py --config /etc/gpufleet/pull.json

Runs ansible-pull from the role's virtual environment against this node
only, passes its output through (to the journal), and writes the result to
node_exporter's textfile collector: the exit status, the task counts from
the play recap, when the run ended and when a run last succeeded. In check
mode the changed count is the node's drift from the playbook.

The exit status is ansible-pull's, so `systemctl --failed` shows a node
whose run failed. Standard library only: it runs without Ansible.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# gpufleet_textfile.py is installed next to this script (from the
# collection's plugins/module_utils/textfile.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpufleet_textfile import gauge, write_atomic  # noqa: E402  pylint: disable=wrong-import-position

# The default callback's recap line, which the service pins as the stdout
# callback (a repository's ansible.cfg could choose another).
RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)(?:\s+skipped=(?P<skipped>\d+))?(?:\s+rescued=(?P<rescued>\d+))?"
    r"(?:\s+ignored=(?P<ignored>\d+))?",
    re.M,
)
COUNTS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
LAST_SUCCESS = "gpufleet_pull_last_success_timestamp_seconds"


def command(cfg: dict, vars_file: str | None = None) -> list[str]:
    """ansible-pull's argument vector for the configuration; the extra
    variables are read from `vars_file` (unsafe_yaml of them)."""
    argv = [
        os.path.join(cfg["venv"], "bin", "ansible-pull"),
        "--url", cfg["url"],
        "--checkout", cfg["branch"],
        "--directory", cfg["directory"],
        "--inventory", cfg["inventory"],
        "--limit", cfg["limit"],
    ]
    if cfg.get("check"):
        argv += ["--check", "--diff"]
    if cfg.get("accept_host_key"):
        argv.append("--accept-host-key")
    if cfg.get("private_key_file"):
        argv += ["--private-key", cfg["private_key_file"]]
    if vars_file:
        argv += ["--extra-vars", "@" + vars_file]
    argv.append(cfg["playbook"])
    return argv


def unsafe_yaml(value) -> str:
    """`value` as YAML (flow style) in which every string is tagged !unsafe.

    Extra variables given on the command line are templates to Ansible: a
    cloud tag such as "{{ lookup('pipe', ...) }}" in gpufleet_tags would be
    run on the node. The push run keeps those values unsafe (the inventory
    plugins mark them so), and the values in pull.json are already what the
    push run rendered, so each run reads them as data, never as templates."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(key))}: {unsafe_yaml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(unsafe_yaml(item) for item in value) + "]"
    if isinstance(value, str):
        # JSON's string escapes are all YAML double-quoted escapes.
        return "!unsafe " + json.dumps(value)
    return json.dumps(value)


def environment(cfg: dict, base: dict[str, str]) -> dict[str, str]:
    """The run's environment: the recap in the default callback's format,
    without colour, whatever the repository's ansible.cfg says."""
    env = dict(base)
    env.update(
        {
            "PATH": os.path.join(cfg["venv"], "bin") + os.pathsep + base.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
        }
    )
    return env


def recap(output: str) -> dict[str, int] | None:
    """Task counts summed over the recap's hosts (one: this node); None when
    the run never reached a recap (the checkout or the parse failed)."""
    rows = list(RECAP.finditer(output))
    if not rows:
        return None
    return {key: sum(int(row[key] or 0) for row in rows) for key in COUNTS}


def public_url(url: str) -> str:
    """The URL without any password or token in it, fit for a metric label.
    (The role refuses URLs with credentials; this is a second guard.)"""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def previous_success(path: str) -> float | None:
    """The last success time from the previous metrics file, so a failed run
    keeps it and an alert can measure how long the node has been failing."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(rf"^{LAST_SUCCESS} (\S+)$", text, re.M)
    return float(found[1]) if found else None


def metrics(cfg: dict, rc: int, counts: dict[str, int] | None, started: float, ended: float,
            last_success: float | None) -> str:
    info = {"url": public_url(cfg["url"]), "branch": cfg["branch"], "playbook": cfg["playbook"],
            "mode": "check" if cfg.get("check") else "apply"}
    lines = [
        *gauge("gpufleet_pull_info", "What gpufleet-pull runs: repository, branch, playbook and mode.", [(info, 1)]),
        *gauge("gpufleet_pull_check_mode", "1 when ansible-pull runs in check mode (drift only), 0 when it applies.",
               [({}, bool(cfg.get("check")))]),
        *gauge("gpufleet_pull_last_run_timestamp_seconds", "When the last ansible-pull run ended.",
               [({}, f"{ended:.0f}")]),
        *gauge("gpufleet_pull_last_run_duration_seconds", "How long the last ansible-pull run took.",
               [({}, f"{ended - started:.1f}")]),
        *gauge("gpufleet_pull_last_exit_status", "Exit status of the last ansible-pull run (0: success).", [({}, rc)]),
        *gauge("gpufleet_pull_recap_found",
               "1 when the last run reached its play recap, else 0 (the counts are then absent).",
               [({}, counts is not None)]),
    ]
    if counts is not None:
        lines += gauge("gpufleet_pull_tasks", "Tasks of the last run by result, from its play recap; "
                       "changed in check mode is the node's drift.",
                       [({"result": key}, counts[key]) for key in COUNTS])
    if last_success is not None:
        lines += gauge(LAST_SUCCESS, "When an ansible-pull run last exited 0.", [({}, f"{last_success:.0f}")])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One ansible-pull run with its result as metrics (gpufleet)")
    parser.add_argument("--config", default="/etc/gpufleet/pull.json")
    args = parser.parse_args(argv)
    cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))

    started = time.time()
    vars_file = None
    if cfg.get("extra_vars"):
        # Beside the checkout, in the root-only directory the role made: the
        # values may be the site's own settings.
        handle, vars_file = tempfile.mkstemp(prefix="extra-vars.", suffix=".yml",
                                             dir=os.path.dirname(os.path.abspath(cfg["directory"])))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(unsafe_yaml(cfg["extra_vars"]) + "\n")
    try:
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            command(cfg, vars_file), env=environment(cfg, dict(os.environ)), cwd="/",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        )
        output = []
        for line in proc.stdout:
            sys.stdout.write(line)
            output.append(line)
        rc = proc.wait()
    finally:
        if vars_file:
            os.unlink(vars_file)
    ended = time.time()

    last_success = ended if rc == 0 else previous_success(cfg["textfile"])
    write_atomic(cfg["textfile"], metrics(cfg, rc, recap("".join(output)), started, ended, last_success))
    return rc


if __name__ == "__main__":
    sys.exit(main())
