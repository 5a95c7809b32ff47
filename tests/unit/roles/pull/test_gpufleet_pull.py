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
        json.dump({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "files": files,
                   "old_report": os.path.exists(os.environ.get("GPUFLEET_DRIFT_REPORT", "/nonexistent"))}}, fh)
    if spec["report"] is not None and os.environ.get("GPUFLEET_DRIFT_REPORT"):
        with open(os.environ["GPUFLEET_DRIFT_REPORT"], "w") as fh:
            json.dump(spec["report"], fh)
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
        "node": "gpu-node-7",
        "report": str(tmp_path / "drift.json"),
        "store": {},
    }

    def run(output: str, rc: int = 0, report=None, **overrides):
        config = dict(cfg, **overrides)
        fake = tmp_path / "venv" / "bin" / "ansible-pull"
        fake.write_text(f"#!{sys.executable}\n" + FAKE_PULL.format(
            spec=json.dumps({"record": str(record), "output": output, "rc": rc, "report": report})))
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


def test_by_default_the_run_sees_the_node_under_its_name_with_localhost_for_the_checkout(node, monkeypatch):
    # Not one of the machine's names: localhost beside it, where
    # ansible-pull checks the repository out; the run limited to the node.
    monkeypatch.setattr(pull.platform, "node", lambda: "ip-10-0-3-7.ec2.internal")
    monkeypatch.setattr(pull.socket, "getfqdn", lambda: "ip-10-0-3-7.ec2.internal")
    argv = node(RECAP_OK, inventory="", limit="")[2]["argv"]
    assert argv[argv.index("--inventory") + 1] == "localhost,gpu-node-7,"
    assert argv[argv.index("--limit") + 1] == "gpu-node-7"


@pytest.mark.parametrize("names", [("gpu-node-7", "gpu-node-7.example.internal"), ("gpu-node-7.lan", "localhost"),
                                   ("other", "gpu-node-7")])
def test_a_node_named_as_the_machine_is_alone_in_the_inventory(node, monkeypatch, names):
    # The checkout runs on the machine's own names too: with localhost
    # beside the node, it would run twice at once in one directory.
    monkeypatch.setattr(pull.platform, "node", lambda: names[0])
    monkeypatch.setattr(pull.socket, "getfqdn", lambda: names[1])
    argv = node(RECAP_OK, inventory="", limit="")[2]["argv"]
    assert argv[argv.index("--inventory") + 1] == "gpu-node-7,"
    assert argv[argv.index("--limit") + 1] == "gpu-node-7"


def test_without_a_node_name_the_run_is_localhost(monkeypatch):
    monkeypatch.setattr(pull.platform, "node", lambda: "box")
    monkeypatch.setattr(pull.socket, "getfqdn", lambda: "box")
    assert pull.inventory({"inventory": "", "limit": "", "node": ""}) == ("localhost,", "localhost")


def test_the_run_keeps_the_nodes_path_so_its_modules_run_on_the_nodes_python():
    """ansible-pull is started by its full path and finds ansible-playbook
    beside itself: the venv is never put on the run's PATH, where
    interpreter discovery would find its Python before the node's."""
    cfg = {"venv": "/opt/gpufleet/pull", "url": "file:///srv/r.git", "branch": "main", "directory": "/d",
           "playbook": "site.yml"}
    assert pull.environment(cfg, {"PATH": "/usr/sbin:/usr/bin"})["PATH"] == "/usr/sbin:/usr/bin"
    assert "/opt/gpufleet/pull" not in pull.environment(cfg, {})["PATH"]
    assert pull.command(cfg)[0] == "/opt/gpufleet/pull/bin/ansible-pull"


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
    role_vars = yaml.safe_load((ROOT / "roles" / "pull" / "vars" / "main.yml").read_text())
    assert role_vars["__pull_strategy_packages"] == [f"mitogen=={pins['mitogen']}"]
    assert role_vars["__pull_report_packages"] == [f"boto3=={pins['boto3']}", f"botocore=={pins['botocore']}"]
    packages = role_vars["__pull_pip_packages"]
    assert packages == {
        "ansible-core": [f"ansible-core=={pins['ansible-core']}"],
        "ansible": [f"ansible-core=={pins['ansible-core']}", f"ansible=={installer.ANSIBLE_VERSION}"],
    }


# What the drift callback writes for one node (the schema of plugin_utils/_drift.py).
REPORT = {
    "version": 1, "started": "2026-12-06T03:00:00+00:00", "finished": "2026-12-06T03:01:00+00:00",
    "check_mode": True, "exit_code": 6,
    "hosts": {"gpu-node-7": {"provider": "aws", "region": "us-east-1", "gpu_model": "A10G", "groups": [],
                             "versions": {}}},
    "records": [
        {"host": "gpu-node-7", "resource": "baseline : Configure chrony", "role": "baseline", "state": "drifted",
         "action": "ansible.builtin.template", "diff": [{"before": "a", "after": "b"}]},
        {"host": "gpu-node-7", "resource": "baseline : Install", "role": "baseline", "state": "in-sync",
         "action": "ansible.builtin.apt"},
        {"host": "gpu-node-7", "resource": "security : sshd", "role": "security", "state": "failed",
         "action": "ansible.builtin.command", "message": "boom"},
    ],
}


def test_a_check_run_writes_the_drift_report_under_the_nodes_name_and_its_figures(node, tmp_path):
    (tmp_path / "drift.json").write_text("{}")  # an earlier run's
    rc, text, seen = node(RECAP_OK, check=True, report=REPORT)
    assert rc == 0
    assert seen["env"]["ANSIBLE_CALLBACKS_ENABLED"] == "gpufleet.cloud.drift"
    assert seen["env"]["GPUFLEET_DRIFT_REPORT"] == str(tmp_path / "drift.json")
    assert seen["env"]["GPUFLEET_DRIFT_HOST"] == "gpu-node-7"
    assert seen["old_report"] is False, "an earlier run's report was still there during the run"
    got = samples(text)
    assert got["gpufleet_pull_drift_report_found"] == 1
    assert got["gpufleet_pull_drift_exit_code"] == 6
    assert {k: v for k, v in got.items() if k.startswith("gpufleet_pull_drift_resources")} == {
        'gpufleet_pull_drift_resources{state="in-sync"}': 1, 'gpufleet_pull_drift_resources{state="drifted"}': 1,
        'gpufleet_pull_drift_resources{state="failed"}': 1, 'gpufleet_pull_drift_resources{state="unreachable"}': 0,
        'gpufleet_pull_drift_resources{state="could-not-verify"}': 0}
    # No bucket: the report stays on the node, and no upload is claimed.
    assert "gpufleet_pull_report_upload_ok" not in got


@pytest.mark.parametrize("written", [None, "{\"records\": ["])
def test_a_check_run_without_a_readable_report_says_so_and_claims_no_exit_code(node, tmp_path, written):
    (tmp_path / "drift.json").write_text(json.dumps(REPORT))  # an earlier run's: never this one's
    if written is None:
        rc, text = node("fatal: repository not found\n", rc=1, check=True)[:2]
    else:
        rc, text = node(RECAP_OK, check=True, report=written)[:2]
    got = samples(text)
    assert got["gpufleet_pull_drift_report_found"] == 0
    assert "gpufleet_pull_drift_exit_code" not in got
    assert not any(name.startswith("gpufleet_pull_drift_resources") for name in got)


def test_an_applying_run_has_no_drift_report(node):
    text, seen = node(RECAP_OK, report=REPORT)[1:]
    assert "ANSIBLE_CALLBACKS_ENABLED" not in seen["env"]
    assert not any(name.startswith("gpufleet_pull_drift") for name in samples(text))


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A bucket in moto's S3 and the backups' environment file, its
    values shell-quoted as the backup role writes them."""
    moto = pytest.importorskip("moto")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    env = tmp_path / "restic.env"
    env.write_text("RESTIC_REPOSITORY=s3:https://s3.example/b\nAWS_ACCESS_KEY_ID=AKIDEXAMPLE\n"
                   "AWS_SECRET_ACCESS_KEY='se cret'\nAWS_DEFAULT_REGION=eu-west-1\n")
    with moto.mock_aws():
        import boto3
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="fleet")
        yield s3, {"bucket": "fleet", "prefix": "gpufleet/drift/", "credentials_file": str(env),
                   "endpoint": "", "region": "us-east-1", "addressing": "auto"}


def test_the_report_is_uploaded_to_the_fleets_store(node, store):
    s3, settings = store
    rc, text = node(RECAP_OK, check=True, report=REPORT, store=settings)[:2]
    assert rc == 0
    body = s3.get_object(Bucket="fleet", Key="gpufleet/drift/gpu-node-7.json")["Body"].read()
    assert json.loads(body) == REPORT
    got = samples(text)
    assert got["gpufleet_pull_report_upload_ok"] == 1
    assert got["gpufleet_pull_report_last_upload_timestamp_seconds"] == pytest.approx(
        got["gpufleet_pull_last_run_timestamp_seconds"], abs=5)


def test_a_failed_upload_is_a_metric_and_a_line_and_keeps_the_runs_status(node, store, capsys):
    s3, settings = store
    first = samples(node(RECAP_OK, check=True, report=REPORT, store=settings)[1])
    rc, text = node(RECAP_OK, rc=2, check=True, report=REPORT, store=dict(settings, bucket="no-such-bucket"))[:2]
    assert rc == 2
    got = samples(text)
    assert got["gpufleet_pull_report_upload_ok"] == 0
    # The last upload that landed is kept, so its age can be alerted on.
    assert got["gpufleet_pull_report_last_upload_timestamp_seconds"] == \
        first["gpufleet_pull_report_last_upload_timestamp_seconds"]
    assert "s3://no-such-bucket/gpufleet/drift/gpu-node-7.json" in capsys.readouterr().err
    # No report at all: nothing to upload, and that is said too.
    text = node("fatal\n", rc=1, check=True, store=settings)[1]
    assert samples(text)["gpufleet_pull_report_upload_ok"] == 0


def test_the_backups_credentials_are_read_as_the_shell_would(tmp_path):
    env = tmp_path / "restic.env"
    env.write_text("# comment\nRESTIC_PASSWORD_FILE=/etc/x\nAWS_ACCESS_KEY_ID=AKID\n"
                   "AWS_SECRET_ACCESS_KEY='a b'\"c\"\nAWS_DEFAULT_REGION=cn-hangzhou\n")
    assert pull.store_credentials(str(env)) == {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "a bc",
                                                "AWS_DEFAULT_REGION": "cn-hangzhou"}
    assert pull.store_credentials(str(tmp_path / "missing")) == {}
    # A line the shell could not read either is left out, not a crash.
    env.write_text("AWS_ACCESS_KEY_ID='unbalanced\nAWS_SECRET_ACCESS_KEY=s\n")
    assert pull.store_credentials(str(env)) == {"AWS_SECRET_ACCESS_KEY": "s"}
