"""gpufleet.cloud.apt_install in a real ansible-playbook run against this
machine (a local connection), in check mode only: apt does not run where
dpkg has every package at the version asked for, and runs, with its own
answer, wherever dpkg cannot vouch for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
# ansible.builtin.apt needs Debian's apt bindings, which the nodes' python3
# has and a virtual environment does not.
NODE_PYTHON = "/usr/bin/python3"
HAS_APT = os.path.exists(NODE_PYTHON) and subprocess.run(
    [NODE_PYTHON, "-c", "import apt"], capture_output=True, check=False).returncode == 0
DPKG_VERSION = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True,
                              check=False).stdout.strip()

CASES = {
    "installed": {"name": ["dpkg", "coreutils"], "install_recommends": False},
    "installed at its version": {"name": [f"dpkg={DPKG_VERSION}"]},
    "nothing": {"name": []},
    "one missing": {"name": ["dpkg", "gpufleet-no-such-package"]},
    "another version": {"name": ["dpkg=0.0.0-0"]},
    "a version pattern": {"name": ["dpkg=*"]},
    "bad state": {"name": ["dpkg"], "state": "absent"},
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if not DPKG_VERSION:
        pytest.skip("no dpkg on this machine")
    tmp = tmp_path_factory.mktemp("apt_install")
    local = {"ansible_connection": "local", "ansible_python_interpreter": NODE_PYTHON if HAS_APT else sys.executable}
    (tmp / "inventory.json").write_text(json.dumps({"all": {"hosts": {"local": local}}}))
    tasks = [{"name": case, "gpufleet.cloud.apt_install": args, "ignore_errors": True} for case, args in CASES.items()]
    (tmp / "play.yml").write_text(json.dumps([{"hosts": "local", "gather_facts": False, "tasks": tasks}]))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    # Check mode: nothing is ever installed on this machine.
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--check", "-i",
                           str(tmp / "inventory.json"), str(tmp / "play.yml")], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp, check=False)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {task["task"]["name"]: task["hosts"]["local"] for task in report["plays"][0]["tasks"]}


@pytest.mark.parametrize("case", ["installed", "installed at its version", "nothing"])
def test_apt_does_not_run_where_dpkg_has_everything(results, case):
    result = results[case]
    assert result["apt_ran"] is False and not result.get("changed") and not result.get("failed"), result
    assert result["msg"] == ("no package to install" if case == "nothing"
                             else "installed: " + ", ".join(CASES[case]["name"])), result


@pytest.mark.parametrize("case", ["one missing", "another version", "a version pattern"])
def test_apt_runs_with_every_package_where_dpkg_cannot_vouch_for_one(results, case):
    result = results[case]
    assert result["apt_ran"] is True, result
    if not HAS_APT:
        pytest.skip(f"no {NODE_PYTHON} with Debian's apt bindings here: apt's own answer cannot be read")
    if case == "a version pattern":
        # Installed, and the pattern matches it: apt finds nothing wrong.
        assert not result.get("failed"), result
    else:
        # apt's own refusal, in check mode as in a run.
        assert result.get("failed"), result
        assert {"one missing": "gpufleet-no-such-package", "another version": "dpkg=0.0.0-0"}[case] in result["msg"]


def test_only_present_is_accepted_and_the_error_names_the_option(results):
    result = results["bad state"]
    assert result.get("failed") and "apt_ran" not in result, result
    assert "state" in result["msg"] and "present" in result["msg"] and "absent" in result["msg"], result["msg"]
