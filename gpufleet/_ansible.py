"""Running the collection's playbooks through ansible-runner, for the
commands that do: `gpufleet drift` (the scan and the fix) and
`gpufleet guard status`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import ansible_runner


def progress(stream, quiet=False):
    """ansible-runner's event handler: each task and unreachable node as
    progress (not with quiet), and each failed task always."""
    tasks = {"n": 0}

    def handler(event: dict) -> bool:
        kind = event.get("event")
        data = event.get("event_data", {})
        if quiet and kind in ("playbook_on_task_start", "runner_on_unreachable"):
            return True
        failed = failed_task(event)
        if kind == "playbook_on_task_start":
            tasks["n"] += 1
            print(f"  [{tasks['n']:>3}] {data.get('task', '')}", file=stream, flush=True)
        elif kind == "runner_on_unreachable":
            print(f"        unreachable: {data.get('host')}", file=stream, flush=True)
        elif failed is not None:
            # Without this a failed --fix says only "rc 2": which node, which
            # task and why. A no_log task's result is censored by Ansible.
            print(f"        failed: {failed['host']}: {failed['task']}: {failed['msg']}", file=stream, flush=True)
        return True  # keep the event in ansible-runner's artifacts

    return handler


def failed_task(event: dict) -> dict | None:
    """A task failure that counts (not one under ignore_errors) from an
    ansible-runner event: its host, role, task and why; None for any other
    event. A rescued failure counts: the block's other tasks never ran."""
    if event.get("event") not in ("runner_on_failed", "runner_item_on_failed"):
        return None
    data = event.get("event_data") or {}
    if data.get("ignore_errors"):
        return None
    res = data.get("res") or {}
    return {"host": str(data.get("host")), "role": str(data.get("role") or ""), "task": str(data.get("task") or ""),
            "msg": str(res.get("msg") or res.get("stderr") or "")[:500]}


def collections_env(root: Path) -> dict[str, str]:
    """What makes ansible-playbook load the collection at `root`. A
    checkout's ansible.cfg names the checkout itself (collections/), so it
    needs nothing. An installed collection's copy of that ansible.cfg names
    paths that exist only in a checkout: the run gets the collection's own
    path first, then Ansible's configured paths (where its dependencies,
    ansible.posix and community.general, are installed)."""
    if (root / "galaxy.yml").is_file():
        return {}
    from . import _project  # pylint: disable=import-outside-toplevel

    # root is <path>/ansible_collections/gpufleet/cloud.
    paths = [str(root.parents[2])]
    paths += [p for p in _project.configured_collection_paths() if p not in paths]
    return {"ANSIBLE_COLLECTIONS_PATH": os.pathsep.join(paths)}


def ansible_env(root: Path) -> dict[str, str]:
    """The environment Ansible's commands run in for the collection at
    `root`."""
    # Ansible's commands from the environment gpufleet is installed in,
    # first: a venv's gpufleet must work without the venv being activated.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    # The project's ansible.cfg, unless the caller chose one, as Ansible
    # itself would honour (bench/fleet compares it with Ansible's defaults).
    # An installed collection ships the checkout's ansible.cfg (mitogen,
    # SSH settings, a failed inventory source fails the run), so an
    # installed CLI runs with the same settings. Ansible skips an
    # ANSIBLE_CONFIG that does not exist and searches as usual.
    config = os.environ.get("ANSIBLE_CONFIG") or str(root / "ansible.cfg")
    return {"ANSIBLE_CONFIG": config, "ANSIBLE_NOCOLOR": "1", "PATH": path, **collections_env(root)}


def list_inventory(root: Path, inventory: str) -> tuple[dict | None, str]:
    """`ansible-inventory --list` of the inventory with the collection's
    settings: (its JSON, "") or (None, why not)."""
    env = {**os.environ, **ansible_env(root)}
    command = [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(Path(inventory).resolve()), "--list"]
    try:
        done = subprocess.run(command, cwd=str(root), env=env, capture_output=True, text=True, check=False,
                              timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if done.returncode != 0:
        return None, (done.stderr.strip() or done.stdout.strip())[-2000:]
    try:
        return json.loads(done.stdout), ""
    except ValueError as exc:
        return None, f"ansible-inventory printed no JSON ({exc})"


def run_playbook(root: Path, playbook: str, inventory: str, extra_env: dict[str, str], cmdline: str,
                 limit: str | None, tags: str | None, quiet: bool, on_event=None) -> tuple[int, str]:
    """ansible-playbook through ansible-runner with the collection's
    settings; ``on_event`` also sees every event (a command that reads
    the tasks' results). Returns the rc and runner's status."""
    env = {**ansible_env(root), **extra_env}
    if not quiet:
        print(f"gpufleet: running {root / playbook}", file=sys.stderr, flush=True)
    shown = progress(sys.stderr, quiet)

    def handler(event: dict) -> bool:
        if on_event is not None:
            on_event(event)
        return shown(event)

    with tempfile.TemporaryDirectory(prefix="gpufleet-runner-") as private:
        result = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(root),
            playbook=str(root / playbook),
            inventory=str(Path(inventory).resolve()),
            cmdline=cmdline,
            limit=limit,
            tags=tags,
            envvars=env,
            quiet=True,
            event_handler=handler,
        )
        return result.rc, result.status
