"""Helpers for the lab tests beyond one node (tests/support/nodes.py has
those): the gpufleet command, refusals, this machine, a cut-off site.yml
run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from tests.support.nodes import ROLE_PLAYBOOK, ROOT, ansible_env, recap, run_playbook


def gpufleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The gpufleet command from the venv that runs these tests; `env` adds
    to its environment."""
    exe = shutil.which("gpufleet")
    assert exe, "the gpufleet command is not installed in this environment"
    return subprocess.run([exe, *args], cwd=ROOT, env={**ansible_env(), **(env or {})}, capture_output=True,
                          text=True, check=False)


def assert_refused_before_any_change(result: subprocess.CompletedProcess, node: str, variable: str) -> str:
    """The run failed, its message names `variable` (an option, or the reason
    a preflight gives), and no task on `node` changed anything. Returns the
    run's output."""
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert variable in out, f"the error does not name {variable}:\n{out}"
    stats = recap(result.stdout)[node]
    assert stats["failed"] == 1 and stats["changed"] == 0, out
    return out


def converge_this_machine(role: str, extra_vars: dict, tmp_path: Path) -> dict[str, int]:
    """Apply `role` to the machine running the tests (hardware tests: GPU and
    RDMA nodes), twice; the second run must change nothing. Extra variables
    for the site (mirrors, for example) come from the YAML or JSON file named
    by GPUFLEET_TEST_EXTRA_VARS. Returns the first run's recap."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(ROLE_PLAYBOOK.format(role=role))
    args = ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=/usr/bin/python3"]
    args += ["-e", json.dumps(extra_vars)]
    if os.environ.get("GPUFLEET_TEST_EXTRA_VARS"):
        args += ["-e", "@" + os.environ["GPUFLEET_TEST_EXTRA_VARS"]]
    runs = []
    for _attempt in range(2):
        result = run_playbook(*args, str(playbook))
        assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
        runs.append(recap(result.stdout)["localhost"])
    assert runs[1]["changed"] == 0, f"the second run of {role} changed things: {runs[1]}"
    return runs[0]


def kill_site_run_at(marker: str) -> str:
    """Start site.yml on the lab and kill it, with all its workers, as soon as
    `marker` shows in its output: a run cut off mid-role, the way a lost
    laptop session or a cancelled CI job ends one. Returns what it printed."""
    proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [shutil.which("ansible-playbook"), "site.yml", "-i", "inventories/lab"], cwd=ROOT, env=ansible_env(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=60)
    proc.stdout.close()
    return "".join(seen)
