"""Drive site.yml through ansible-runner: the drift scan (check and diff
mode, with the gpufleet.cloud.drift callback) and the remediation run."""

from __future__ import annotations

from pathlib import Path

from .._ansible import run_playbook


def scan(root: Path, inventory: str, report_path: Path, limit: str | None = None, tags: str | None = None,
         quiet: bool = False) -> tuple[int, str]:
    """Run the drift playbook in check and diff mode; the callback writes
    `report_path`. Returns ansible-playbook's rc and runner status."""
    env = {
        "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.cloud.drift",
        "GPUFLEET_DRIFT_REPORT": str(report_path),
    }
    return run_playbook(root, "playbooks/drift.yml", inventory, env, "--check --diff", limit, tags, quiet)


def fix(root: Path, inventory: str, hosts: list[str], roles: list[str], quiet: bool = False,
        on_event=None) -> tuple[int, str]:
    """Converge only the drifted hosts, and only the drifted roles' tags;
    ``on_event`` sees each of the run's events."""
    return run_playbook(root, "site.yml", inventory, {}, "", ",".join(hosts), ",".join(roles) or None, quiet,
                        on_event=on_event)
