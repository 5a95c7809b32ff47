"""The node-side ansible-pull runner of gpufleet.cloud.pull
(roles/pull/files/gpufleet-pull.py), run against a stand-in ansible-pull
that prints what the real one prints and exits as told."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.unit.roles.conftest import load_script

pull = load_script("roles/pull/files/gpufleet-pull.py")
ROOT = Path(__file__).resolve().parents[4]

RECAP_OK = textwrap.dedent(
    """\
    PLAY RECAP *********************************************************************
    localhost                  : ok=7    changed=2    unreachable=0    failed=0    skipped=3    rescued=0    ignored=1
    """
)
RECAP_FAILED = "localhost                  : ok=4    changed=0    unreachable=0    failed=1    skipped=0    rescued=0    ignored=0\n"

# Records its arguments, environment and the files its @-arguments name,
# prints the given output and exits with the given status, like
# ansible-pull's nested ansible-playbook run.
FAKE_PULL = textwrap.dedent(
    """\
    import json, os, sys
    spec = json.loads({spec!r})
    files = {{a[1:]: [open(a[1:]).read(), oct(os.stat(a[1:]).st_mode & 0o777)] for a in sys.argv if a[:1] == "@"}}
    with open(spec["record"], "w") as fh:
        json.dump({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "files": files}}, fh)
    sys.stdout.write(spec["output"])
    sys.exit(spec["rc"])
    """
)


@pytest.fixture
def node(tmp_path):
    """A venv with a stand-in ansible-pull, a config and a textfile path.
    run(output, rc, **config) runs the script once; returns (rc, metrics
    text, what ansible-pull was given)."""
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    record = tmp_path / "record.json"
    cfg = {
        "url": "https://git.example.com/fleet/gpufleet.git",
        "branch": "production",
        "playbook": "site.yml",
        "inventory": "localhost,",
        "limit": "localhost",
        "check": False,
        "extra_vars": {},
        "accept_host_key": False,
        "private_key_file": "",
        "directory": str(tmp_path / "checkout"),
        "venv": str(tmp_path / "venv"),
        "textfile": str(tmp_path / "gpufleet_pull.prom"),
    }

    def run(output: str, rc: int = 0, **overrides):
        config = dict(cfg, **overrides)
        fake = tmp_path / "venv" / "bin" / "ansible-pull"
        fake.write_text(f"#!{sys.executable}\n" + FAKE_PULL.format(
            spec=json.dumps({"record": str(record), "output": output, "rc": rc})))
        fake.chmod(0o755)
        path = tmp_path / "pull.json"
        path.write_text(json.dumps(config))
        status = pull.main(["--config", str(path)])
        return status, Path(config["textfile"]).read_text(), json.loads(record.read_text())

    return run


def samples(text: str) -> dict[str, float]:
    return {
        name: float(value)
        for name, value in (line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    }


def test_a_successful_run_writes_its_counts_and_times(node, capsys):
    rc, text, seen = node("Starting Ansible Pull\n" + RECAP_OK)
    assert rc == 0
    got = samples(text)
    assert got["gpufleet_pull_last_exit_status"] == 0
    assert got["gpufleet_pull_recap_found"] == 1
    assert got['gpufleet_pull_tasks{result="ok"}'] == 7
    assert got['gpufleet_pull_tasks{result="changed"}'] == 2
    assert got['gpufleet_pull_tasks{result="failed"}'] == 0
    assert got['gpufleet_pull_tasks{result="skipped"}'] == 3
    assert got['gpufleet_pull_tasks{result="ignored"}'] == 1
    assert got["gpufleet_pull_last_success_timestamp_seconds"] == got["gpufleet_pull_last_run_timestamp_seconds"]
    assert got["gpufleet_pull_check_mode"] == 0
    assert got[
        'gpufleet_pull_info{url="https://git.example.com/fleet/gpufleet.git",branch="production",'
        'playbook="site.yml",mode="apply"}'
    ] == 1
    # The run's output goes on to the journal.
    assert "Starting Ansible Pull" in capsys.readouterr().out
    # The recap is in the default callback's format, without colour.
    assert seen["env"]["ANSIBLE_STDOUT_CALLBACK"] == "ansible.builtin.default"
    assert seen["env"]["ANSIBLE_NOCOLOR"] == "1"
    assert seen["cwd"] == "/"


def test_ansible_pull_gets_the_url_branch_inventory_limit_and_playbook(node):
    seen = node(RECAP_OK)[2]
    argv = seen["argv"]
    assert argv[argv.index("--url") + 1] == "https://git.example.com/fleet/gpufleet.git"
    assert argv[argv.index("--checkout") + 1] == "production"
    assert argv[argv.index("--inventory") + 1] == "localhost,"
    assert argv[argv.index("--limit") + 1] == "localhost"
    assert argv[-1] == "site.yml"
    for flag in ("--check", "--diff", "--accept-host-key", "--private-key", "--extra-vars"):
        assert flag not in argv


def test_check_mode_reports_drift_as_changed(node):
    rc, text, seen = node(RECAP_OK, check=True, extra_vars={"gpufleet_provider": "aws"},
                          accept_host_key=True, private_key_file="/root/.ssh/deploy")
    assert rc == 0
    assert "--check" in seen["argv"] and "--diff" in seen["argv"] and "--accept-host-key" in seen["argv"]
    argv = seen["argv"]
    assert argv[argv.index("--private-key") + 1] == "/root/.ssh/deploy"
    vars_file = argv[argv.index("--extra-vars") + 1]
    assert seen["files"][vars_file[1:]] == ['{"gpufleet_provider": !unsafe "aws"}\n', "0o600"]
    got = samples(text)
    assert got["gpufleet_pull_check_mode"] == 1
    assert got['gpufleet_pull_tasks{result="changed"}'] == 2
    assert any(name.endswith('mode="check"}') for name in got)


def test_the_extra_variables_file_is_gone_after_the_run_whatever_its_end(node, tmp_path):
    for rc in (0, 2):
        seen = node(RECAP_OK, rc=rc, extra_vars={"gpufleet_spot": True})[2]
        path = seen["argv"][seen["argv"].index("--extra-vars") + 1][1:]
        # In the checkout's root-only parent directory, removed after the run.
        assert os.path.dirname(path) == str(tmp_path) and not os.path.exists(path)
    assert list(tmp_path.glob("extra-vars.*")) == []


# Shaped like the push inventory's discovery variables: cloud-set tag values
# (one a template), a GPU share, a null, a list.
NODE_VARS = {
    "gpufleet_tags": {"team": "{{ 6 * 7 }}", "quote": 'a"b\\c\nd \u00e9'},
    "gpufleet_gpu": {"model": "A10", "count": 0.25, "memory_mib": None},
    "gpufleet_spot": True,
    "gpufleet_public_ip": None,
    "pull_test_list": ["{{ 'x' | upper }}", 3],
}


def test_extra_variables_reach_ansible_as_data_never_as_templates(tmp_path):
    """Ansible itself reads the file: every value arrives as it was, and a
    cloud tag that looks like a template is never run. The same values as
    JSON on the command line (how they went before) are templated, which
    is what the file prevents."""
    ansible = shutil.which("ansible")
    assert ansible, "ansible is not on PATH (the venv's bin goes first, as in the Makefile)"
    path = tmp_path / "vars.yml"
    path.write_text(pull.unsafe_yaml(NODE_VARS) + "\n")
    shown = "{{ {'tags': gpufleet_tags, 'gpu': gpufleet_gpu, 'spot': gpufleet_spot, 'ip': gpufleet_public_ip, " \
            "'list': pull_test_list} | to_json }}"

    def run(extra):
        proc = subprocess.run([ansible, "localhost", "-c", "local", "-i", "localhost,", "-m", "ansible.builtin.debug",
                               "-a", "msg=" + shown, "-e", extra], capture_output=True, text=True, check=False,
                              env=dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.oneline",
                                       ANSIBLE_LOAD_CALLBACK_PLUGINS="1"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(json.loads(proc.stdout.split('"msg": ', 1)[1].rsplit("}", 1)[0]))

    got = run("@" + str(path))
    assert got == {"tags": NODE_VARS["gpufleet_tags"], "gpu": NODE_VARS["gpufleet_gpu"], "spot": True, "ip": None,
                   "list": NODE_VARS["pull_test_list"]}
    # The control: as JSON on the command line, the same values are templates.
    templated = run(json.dumps(NODE_VARS))
    assert str(templated["tags"]["team"]) == "42" and templated["list"][0] == "X", templated


def test_a_failed_run_keeps_the_last_success_and_exits_with_its_status(node):
    first = node(RECAP_OK)[1]
    succeeded = samples(first)["gpufleet_pull_last_success_timestamp_seconds"]
    rc, text = node("TASK [x] fatal\n" + RECAP_FAILED, rc=2)[:2]
    assert rc == 2
    got = samples(text)
    assert got["gpufleet_pull_last_exit_status"] == 2
    assert got['gpufleet_pull_tasks{result="failed"}'] == 1
    assert got["gpufleet_pull_last_success_timestamp_seconds"] == succeeded


def test_a_run_that_never_reached_the_recap_has_no_counts(node):
    rc, text = node("fatal: repository not found\n", rc=1)[:2]
    assert rc == 1
    got = samples(text)
    assert got["gpufleet_pull_recap_found"] == 0
    assert not any(name.startswith("gpufleet_pull_tasks") for name in got)
    # Never succeeded on this node: no success time at all, not a zero.
    assert "gpufleet_pull_last_success_timestamp_seconds" not in got


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://deploy:s3cret@git.example.com/fleet.git", "https://deploy@git.example.com/fleet.git"),
        ("ssh://git@git.example.com:2222/fleet.git", "ssh://git@git.example.com:2222/fleet.git"),
        ("git@git.example.com:fleet/gpufleet.git", "git@git.example.com:fleet/gpufleet.git"),
        ("file:///srv/fleet.git", "file:///srv/fleet.git"),
    ],
)
def test_labels_never_carry_a_password(url, shown):
    assert pull.public_url(url) == shown


def test_recap_sums_hosts_and_reads_older_formats():
    two = RECAP_OK + "node-2 : ok=1 changed=1 unreachable=1 failed=0\n"
    assert pull.recap(two) == {"ok": 8, "changed": 3, "unreachable": 1, "failed": 0, "skipped": 3,
                               "rescued": 0, "ignored": 1}
    assert pull.recap("no recap here") is None


def test_the_role_pins_the_versions_the_project_tests():
    """ansible-core as requirements/constraints.txt pins it; the ansible
    package at the version whose collections `make collections` unpacks."""
    pins = dict(
        line.split("==") for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
        if "==" in line
    )
    spec = importlib.util.spec_from_file_location("install_collections", ROOT / "tools" / "install-collections.py")
    installer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installer)
    packages = yaml.safe_load((ROOT / "roles" / "pull" / "vars" / "main.yml").read_text())["__pull_pip_packages"]
    assert packages == {
        "ansible-core": [f"ansible-core=={pins['ansible-core']}"],
        "ansible": [f"ansible-core=={pins['ansible-core']}", f"ansible=={installer.ANSIBLE_VERSION}"],
    }
