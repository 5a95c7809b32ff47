"""gpufleet.cloud.apt_install in a real ansible-playbook run against this
machine (a local connection), in check mode only: apt does not run where
dpkg has every package at the version asked for, and runs, with its own
answer, wherever dpkg cannot vouch for one."""

from __future__ import annotations

import json
import os
import shutil
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


def manual_packages() -> list[tuple[str, str]]:
    """Two packages installed here by hand (apt's mark), with their
    versions: apt would mark one installed as a dependency, so dpkg alone
    could not vouch for it."""
    marked = subprocess.run(["apt-mark", "showmanual"], capture_output=True, text=True, check=False).stdout.split()
    if not marked:
        return []
    listed = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n", *marked[:20]],
                            capture_output=True, text=True, check=False).stdout
    return [(row[0], row[1]) for row in map(str.split, listed.splitlines()) if row[2:3] == ["ii"]][:2]


MANUAL = manual_packages() if shutil.which("apt-mark") and shutil.which("dpkg-query") else []
(FIRST, VERSION), (SECOND, _SECOND_VERSION) = MANUAL if len(MANUAL) == 2 else (("", ""), ("", ""))
CASES = {
    "installed": {"name": [FIRST, SECOND], "install_recommends": False},
    "installed at its version": {"name": [f"{FIRST}={VERSION}"]},
    "nothing": {"name": []},
    "one missing": {"name": [FIRST, "gpufleet-no-such-package"]},
    "another version": {"name": [f"{FIRST}=0.0.0-0"]},
    "a version pattern": {"name": [f"{FIRST}=*"]},
    "bad state": {"name": [FIRST], "state": "absent"},
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if len(MANUAL) < 2:
        pytest.skip("no two packages installed by hand through apt on this machine")
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


@pytest.mark.parametrize("case", ["one missing", "another version"])
def test_apt_runs_with_every_package_where_dpkg_cannot_vouch_for_one(results, case):
    result = results[case]
    assert result["apt_ran"] is True, result
    if not HAS_APT:
        pytest.skip(f"no {NODE_PYTHON} with Debian's apt bindings here: apt's own answer cannot be read")
    # apt's own refusal, in check mode as in a run.
    assert result.get("failed"), result
    assert {"one missing": "gpufleet-no-such-package", "another version": f"{FIRST}=0.0.0-0"}[case] in result["msg"]


def test_only_present_is_accepted_and_the_error_names_the_option(results):
    result = results["bad state"]
    assert result.get("failed") and "apt_ran" not in result, result
    assert "state" in result["msg"] and "present" in result["msg"] and "absent" in result["msg"], result["msg"]


def test_a_version_pattern_skips_apt_only_where_the_installed_version_is_its_one_match(results):
    # What apt itself lists for the package (its version table), read here
    # apart from the action: "*" matches every version it knows.
    table = subprocess.run(["apt-cache", "policy", FIRST], capture_output=True, text=True, check=False,
                           env={**os.environ, "LC_ALL": "C"}).stdout
    known = [line.split()[-2] for line in table.splitlines()
             if line.startswith(("     ", " *** ")) and line.split()[-1].lstrip("-").isdigit()]
    result = results["a version pattern"]
    assert known and not result.get("failed"), (known, result)
    assert result["apt_ran"] is (known != [VERSION]), (known, result)
    if known == [VERSION]:
        assert not result.get("changed"), result
