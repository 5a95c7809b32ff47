# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""One ansible-pull run, installed by gpufleet.cloud.pull and started by
gpufleet-pull.timer.

    /opt/gpufleet/pull/bin/python3 gpufleet-pull.py --config /etc/gpufleet/pull.json

Runs ansible-pull from the role's virtual environment against this node
only, passes its output through (to the journal), and writes the result to
node_exporter's textfile collector: the exit status, the task counts from
the play recap, when the run ended and when a run last succeeded. In check
mode the changed count is the node's drift from the playbook.

A check-mode run also writes the drift report (gpufleet.cloud.drift, the
schema `gpufleet drift` writes) under the node's inventory name, puts its
exit bitmask and counts in the metrics, and, with a bucket configured,
uploads it to the fleet's object store, where `gpufleet drift --from`
merges the fleet's reports.

The exit status is ansible-pull's, so `systemctl --failed` shows a node
whose run failed. The standard library, and boto3 for the upload, which the
role installs in the virtual environment the service runs this with.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import socket
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
LAST_UPLOAD = "gpufleet_pull_report_last_upload_timestamp_seconds"
# A drift record's states (plugin_utils/_drift.py).
STATES = ("in-sync", "drifted", "failed", "unreachable", "could-not-verify")


def checkout_hosts() -> set[str]:
    """The names ansible-pull runs its checkout on (its own limit, from
    this machine's names): localhost, 127.0.0.1, the node name and FQDN,
    and their first labels."""
    node, fqdn = platform.node(), socket.getfqdn()
    return {"localhost", "127.0.0.1", node, fqdn, node.split(".")[0], fqdn.split(".")[0]} - {""}


def inventory(cfg: dict) -> tuple[str, str]:
    """ansible-pull's inventory and limit: as configured, or by default the
    node under its own name (so the roles see the inventory_hostname a push
    run gives them), with localhost beside it for ansible-pull's checkout
    unless the node's name is already one the checkout runs on (both in
    the inventory, the checkout would run twice at once in one directory)."""
    node = cfg.get("node") or "localhost"
    default = f"{node}," if node in checkout_hosts() else f"localhost,{node},"
    return cfg.get("inventory") or default, cfg.get("limit") or node


def command(cfg: dict, vars_file: str | None = None) -> list[str]:
    """ansible-pull's argument vector for the configuration; the extra
    variables are read from `vars_file` (unsafe_yaml of them)."""
    hosts, limit = inventory(cfg)
    argv = [
        os.path.join(cfg["venv"], "bin", "ansible-pull"),
        "--url", cfg["url"],
        "--checkout", cfg["branch"],
        "--directory", cfg["directory"],
        "--inventory", hosts,
        "--limit", limit,
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
    without colour, whatever the repository's ansible.cfg says; in check
    mode, the drift callback writing the node's report under its name.

    The venv is not on PATH: ansible-pull finds ansible-playbook beside
    itself, and the modules then run on the Python that interpreter
    discovery finds on the node's own PATH, as in a push run. With the
    venv first, discovery took the venv's Python, which has no apt
    bindings: without Mitogen the apt modules started the system's Python
    for them, under Mitogen package_facts found no package manager."""
    env = dict(base)
    env.update(
        {
            "PATH": base.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
        }
    )
    if cfg.get("check") and cfg.get("report"):
        env.update({"ANSIBLE_CALLBACKS_ENABLED": "gpufleet.cloud.drift", "GPUFLEET_DRIFT_REPORT": cfg["report"],
                    "GPUFLEET_DRIFT_HOST": cfg.get("node") or ""})
    return env


def drift_summary(path: str) -> dict | None:
    """The report's exit bitmask and its records by state; None when the
    run wrote no report (it never reached its end) or one that cannot be
    read."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        records = report["records"]
        states = {state: 0 for state in STATES}
        for record in records:
            states[record["state"]] = states.get(record["state"], 0) + 1
        return {"exit_code": int(report["exit_code"]), "states": states}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_credentials(path: str) -> dict[str, str]:
    """The AWS_* settings of the backups' environment file (restic.env, its
    values shell-quoted), so the upload uses the backups' credentials; none
    where the file is missing: then the SDK's own chain (an instance role)."""
    found = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        name, sep, value = line.partition("=")
        if sep and name.startswith("AWS_") and name.isupper():
            try:
                words = shlex.split(value)
            except ValueError:  # an unbalanced quote: not a value the shell would read either
                continue
            found[name] = words[0] if words else ""
    return found


def upload(store: dict, path: str, node: str) -> str | None:
    """Put the report at s3://bucket/prefix/<node>.json through the fleet's
    object store endpoint (S3, or OSS, COS and OBS through their S3 APIs);
    None when it landed, else why not."""
    try:
        import boto3  # pylint: disable=import-outside-toplevel
        from botocore.config import Config  # pylint: disable=import-outside-toplevel
        from botocore.exceptions import BotoCoreError, ClientError  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return f"boto3 is not installed in this Python ({exc}): the pull role installs it with a report bucket"
    credentials = store_credentials(store.get("credentials_file") or "")
    session = boto3.session.Session(
        aws_access_key_id=credentials.get("AWS_ACCESS_KEY_ID") or None,
        aws_secret_access_key=credentials.get("AWS_SECRET_ACCESS_KEY") or None,
        aws_session_token=credentials.get("AWS_SESSION_TOKEN") or None,
        region_name=store.get("region") or credentials.get("AWS_DEFAULT_REGION") or "us-east-1",
    )
    config = Config(connect_timeout=10, read_timeout=30, retries={"max_attempts": 4, "mode": "standard"},
                    s3={"addressing_style": store.get("addressing") or "auto"})
    key = "/".join(part for part in (store.get("prefix", "").strip("/"), node + ".json") if part)
    try:
        client = session.client("s3", endpoint_url=store.get("endpoint") or None, config=config)
        client.put_object(Bucket=store["bucket"], Key=key, Body=Path(path).read_bytes(),
                          ContentType="application/json")
    except (BotoCoreError, ClientError, OSError) as exc:
        return f"s3://{store['bucket']}/{key}: {exc}"
    return None


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


def previous_value(path: str, name: str = LAST_SUCCESS) -> float | None:
    """A time from the previous metrics file (the last success, the last
    upload), so a failed run keeps it and an alert can measure how long the
    node has been failing."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found[1]) if found else None


def metrics(cfg: dict, rc: int, counts: dict[str, int] | None, started: float, ended: float,
            last_success: float | None, drift: dict | None = None,
            uploaded: tuple[bool, float | None] | None = None) -> str:
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
    if cfg.get("check") and cfg.get("report"):
        lines += gauge("gpufleet_pull_drift_report_found",
                       "1 when the last check-mode run wrote its drift report, else 0 (then no exit code or counts).",
                       [({}, drift is not None)])
    if drift is not None:
        lines += gauge("gpufleet_pull_drift_exit_code", "The last drift report's exit bitmask, as gpufleet drift "
                       "exits: 0 in sync, 2 drift, 4 a failed check, 8 unreachable.", [({}, drift["exit_code"])])
        lines += gauge("gpufleet_pull_drift_resources", "Resources of the last drift report by state.",
                       [({"state": state}, count) for state, count in drift["states"].items()])
    if uploaded is not None:
        ok, last = uploaded
        lines += gauge("gpufleet_pull_report_upload_ok",
                       "1 when the last drift report reached the object store, else 0.", [({}, ok)])
        if last is not None:
            lines += gauge(LAST_UPLOAD, "When a drift report last reached the object store.", [({}, f"{last:.0f}")])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One ansible-pull run with its result as metrics (gpufleet)")
    parser.add_argument("--config", default="/etc/gpufleet/pull.json")
    args = parser.parse_args(argv)
    cfg = json.loads(Path(args.config).read_text(encoding="utf-8"))

    started = time.time()
    report = cfg.get("report") if cfg.get("check") else None
    if report:
        # A report left by an earlier run must never pass for this one's.
        Path(report).unlink(missing_ok=True)
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

    last_success = ended if rc == 0 else previous_value(cfg["textfile"])
    drift = drift_summary(report) if report else None
    uploaded = None
    store = cfg.get("store") or {}
    if report and store.get("bucket"):
        why = upload(store, report, cfg.get("node") or "localhost") if drift is not None else "no drift report"
        if why:
            print(f"gpufleet-pull: the drift report was not uploaded: {why}", file=sys.stderr)
        uploaded = (why is None, time.time() if why is None else previous_value(cfg["textfile"], LAST_UPLOAD))
    write_atomic(cfg["textfile"], metrics(cfg, rc, recap("".join(output)), started, ended, last_success,
                                          drift, uploaded))
    return rc


if __name__ == "__main__":
    sys.exit(main())
