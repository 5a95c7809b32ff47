"""gpufleet.cloud.pull on a converged node: Ansible pinned in its venv, the
timer active, and the timer's first ansible-pull run done, from the
configured branch and playbook of the file:// repository prepare.yml made,
with its result in node_exporter's textfile directory."""

from __future__ import annotations

import base64
import json
import re
import time

import pytest
from conftest import assert_dropin_moved_aside, assert_file, assert_package

VENV = "/opt/gpufleet/pull"
PROM = "/var/lib/prometheus/node-exporter/gpufleet_pull.prom"
# The node's name in its runs (molecule.yml's pull_node_name, not its host
# name pull-debian12), the report's path, and molecule.yml's S3 server on
# the host.
NODE = "pull-node-7"
REPORT = "/var/lib/gpufleet/pull/drift.json"
S3_PORT = 39152
# The test playbook: a directory, a file and a command that always changes.
EXPECTED_TASKS = {"ok": 4, "changed": 3, "failed": 0, "unreachable": 0, "skipped": 0, "rescued": 0, "ignored": 0}


@pytest.fixture(scope="module")
def first_run(host):
    """Wait for the timer's first run (5 s after converge started the timer)
    to end; returns systemd's view of it."""
    deadline = time.monotonic() + 240
    while True:
        show = host.check_output(
            "systemctl show gpufleet-pull.service -p Result -p ExecMainStatus -p ExecMainExitTimestampMonotonic"
            " -p ActiveState"
        )
        props = dict(line.split("=", 1) for line in show.splitlines())
        if props["ExecMainExitTimestampMonotonic"] != "0" and props["ActiveState"] != "activating":
            return props
        assert time.monotonic() < deadline, f"gpufleet-pull.service has not finished a run: {props}"
        time.sleep(3)


def metrics(host) -> dict[str, float]:
    samples = {}
    for line in host.file(PROM).content_string.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_ansible_core_is_pinned_in_the_venv(host):
    assert_package(host, "git")
    assert_package(host, "python3-venv")
    version = host.check_output(f"{VENV}/bin/python3 -c 'import ansible.release as r; print(r.__version__)'")
    assert version == "2.19.14"
    # ansible-core alone, as the scenario asked: not the 54 MB ansible package.
    assert host.run(f"{VENV}/bin/pip show ansible").rc != 0
    # A report bucket is set: the SDK the upload uses, at the project's pin.
    assert host.check_output(f"{VENV}/bin/python3 -c 'import boto3; print(boto3.__version__)'") == "1.44.8"
    # Mitogen, which the repository's ansible.cfg names as the strategy.
    assert host.check_output(f"{VENV}/bin/python3 -c 'import importlib.metadata as m; print(m.version(\"mitogen\"))'") \
        == "0.3.54"


def test_the_script_config_and_units_are_in_place(host):
    assert_file(host, "/usr/local/lib/gpufleet/gpufleet-pull.py", contains=("def recap(",))
    assert_file(host, "/usr/local/lib/gpufleet/gpufleet_textfile.py", contains=("def write_atomic(",))
    config = json.loads(assert_file(host, "/etc/gpufleet/pull.json", mode=0o600))
    assert config["url"] == "file:///srv/gpufleet-pull.git"
    assert config["branch"] == "production"
    assert config["playbook"] == "pull/node.yml"
    assert config["check"] is False
    assert config["extra_vars"] == {"pull_test_greeting": "hello from the pull role {{ 6 * 7 }}"}
    assert config["node"] == NODE and config["report"] == REPORT
    # The store's place, and where its credentials are read: never a secret here.
    assert config["store"] == {"bucket": "gpufleet-reports", "endpoint": "http://10.0.2.2:39152",
                               "region": "us-east-1", "prefix": "gpufleet/drift",
                               "credentials_file": "/etc/gpufleet/backup/restic.env"}
    service = assert_file(
        host,
        "/etc/systemd/system/gpufleet-pull.service",
        contains=("Type=oneshot", f"ExecStart={VENV}/bin/python3 /usr/local/lib/gpufleet/gpufleet-pull.py"),
    )
    assert "TimeoutStartSec=60min" in service
    timer = assert_file(host, "/etc/systemd/system/gpufleet-pull.timer", contains=("WantedBy=timers.target",))
    assert "OnActiveSec=5s" in timer and "OnUnitInactiveSec=240min" in timer and "RandomizedDelaySec=0s" in timer
    assert host.file("/var/lib/gpufleet/pull").mode == 0o700


def test_a_drop_in_that_overrode_the_timer_is_moved_aside(host):
    # prepare.yml's drop-in made the interval a day.
    assert_dropin_moved_aside(host, "gpufleet-pull.timer", "local.conf", "OnUnitInactiveSec=1d")


def test_the_timer_is_enabled_and_active(host):
    timer = host.service("gpufleet-pull.timer")
    assert timer.is_enabled
    assert host.check_output("systemctl is-active gpufleet-pull.timer") == "active"


def test_the_first_run_succeeded_from_the_configured_branch(host, first_run):
    assert first_run["Result"] == "success", first_run
    assert first_run["ExecMainStatus"] == "0", first_run
    # The production branch's playbook ran, with the role's extra variables.
    marker = host.file("/var/lib/pull-test/marker").content_string
    # Data, not a template: "42" would mean the run templated it.
    assert marker == "branch=production greeting=hello from the pull role {{ 6 * 7 }}\n"
    head = host.check_output("git -C /var/lib/gpufleet/pull/checkout rev-parse --abbrev-ref HEAD")
    assert head in ("production", "HEAD")  # a shallow checkout of a branch may be detached
    log = host.check_output("git -C /var/lib/gpufleet/pull/checkout log -1 --format=%s")
    assert log == "pull test playbook on production"


def recaps(host) -> list[dict[str, int]]:
    """Every run's play recap, from the journal, oldest first."""
    journal = host.check_output("journalctl -u gpufleet-pull.service --no-pager -o cat")
    return [
        {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}
        # The run sees the node under its inventory name, as a push run does.
        for line in journal.splitlines() if re.match(rf"{re.escape(NODE)}\s+: ok=", line)
    ]


def test_the_first_run_did_the_test_playbooks_work(host, first_run):
    assert recaps(host)[0] == EXPECTED_TASKS


def test_the_modules_ran_through_mitogen_on_the_nodes_python(host, first_run):
    """Mitogen's interpreter ran the modules (its process title names it),
    and that interpreter is the node's own Python, as in a push run: not
    the venv's, which has no apt bindings."""
    runner = host.file("/var/lib/pull-test/module-runner").content_string
    assert "(mitogen:" in runner and runner.startswith("/usr/bin/python3"), runner


def test_the_metrics_hold_the_last_runs_result(host, first_run):
    """Exact values: the last run's recap as the journal has it (the first
    run's, unless the node ran again since; then the marker was already
    there, and only the command changed)."""
    assert_file(host, PROM)
    samples = metrics(host)
    assert samples["gpufleet_pull_last_exit_status"] == 0
    assert samples["gpufleet_pull_check_mode"] == 0
    assert samples["gpufleet_pull_recap_found"] == 1
    last = recaps(host)[-1]
    assert last in (EXPECTED_TASKS, dict(EXPECTED_TASKS, changed=1))
    for result, count in last.items():
        assert samples[f'gpufleet_pull_tasks{{result="{result}"}}'] == count, result
    ran = samples["gpufleet_pull_last_run_timestamp_seconds"]
    assert samples["gpufleet_pull_last_success_timestamp_seconds"] == ran
    # The run ended after the service started and no later than now.
    started = float(host.check_output("systemctl show gpufleet-pull.service -p ExecMainStartTimestamp --value"
                                      " --timestamp=unix").lstrip("@"))
    now = float(host.check_output("date +%s"))
    assert started - 1 <= ran <= now + 1
    assert 0 < samples["gpufleet_pull_last_run_duration_seconds"] < 240
    info = [name for name in samples if name.startswith("gpufleet_pull_info{")]
    assert info == [
        'gpufleet_pull_info{url="file:///srv/gpufleet-pull.git",branch="production",'
        'playbook="pull/node.yml",mode="apply"}'
    ]


# ---- a check-mode run: the drift report, its figures, its upload ----------
# Last in this module: it runs the service once more, in check mode, and
# puts the settings back, so Molecule's later check still finds the node
# converged.


@pytest.fixture(scope="module")
def check_run(host, first_run):
    """One check-mode run of gpufleet-pull.service after a hand-made change
    to the file the test playbook writes; yields systemctl's result."""
    config = host.file("/etc/gpufleet/pull.json").content_string
    marker = host.file("/var/lib/pull-test/marker").content_string
    settings = dict(json.loads(config), check=True)

    def write(path, text):
        encoded = base64.b64encode(text.encode()).decode()
        host.check_output(f"printf %s {encoded} | base64 -d > {path}")

    write("/etc/gpufleet/pull.json", json.dumps(settings))
    write("/var/lib/pull-test/marker", "changed by hand\n")
    try:
        # A oneshot service: start returns when the run has ended.
        yield host.run("timeout 240 systemctl start gpufleet-pull.service")
    finally:
        write("/etc/gpufleet/pull.json", config)
        write("/var/lib/pull-test/marker", marker)


def test_a_check_run_writes_the_nodes_drift_report_with_its_figures(host, check_run):
    assert check_run.rc == 0, check_run.stdout + check_run.stderr + host.check_output(
        "journalctl -u gpufleet-pull.service --no-pager -n 60 -o cat")
    report = json.loads(assert_file(host, REPORT))
    # Under the node's inventory name, the one the run saw.
    assert set(report["hosts"]) == {NODE}
    assert {r["host"] for r in report["records"]} == {NODE}
    assert report["check_mode"] is True
    marker = next(r for r in report["records"] if r["resource"] == "Write the marker")
    assert marker["state"] == "drifted" and "changed by hand" in json.dumps(marker["diff"]), marker
    assert report["exit_code"] == 2
    samples = metrics(host)
    assert samples["gpufleet_pull_check_mode"] == 1
    assert samples["gpufleet_pull_drift_report_found"] == 1
    assert samples["gpufleet_pull_drift_exit_code"] == report["exit_code"]
    assert samples['gpufleet_pull_drift_resources{state="drifted"}'] == sum(
        r["state"] == "drifted" for r in report["records"])
    # The hand-made change is still there: check mode changed nothing.
    assert host.file("/var/lib/pull-test/marker").content_string == "changed by hand\n"


def test_a_check_run_uploads_its_report_to_the_fleets_store(host, check_run):
    from tests.emulators import s3_server

    report = json.loads(host.file(REPORT).content_string)
    stored = s3_server.client(S3_PORT).get_object(Bucket="gpufleet-reports", Key=f"gpufleet/drift/{NODE}.json")
    assert json.loads(stored["Body"].read()) == report
    samples = metrics(host)
    assert samples["gpufleet_pull_report_upload_ok"] == 1
    assert samples["gpufleet_pull_report_last_upload_timestamp_seconds"] >= \
        samples["gpufleet_pull_last_run_timestamp_seconds"]
