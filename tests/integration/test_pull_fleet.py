"""Pull mode on the lab fleet: every node of a three-node lab runs
ansible-pull of this tree and uploads its drift report to the lab's object
store; `gpufleet drift --from` merges them.

The session's fleet (tests/integration/conftest.py: the GPU-stack node and
a plain node, converged by site.yml from here) grows by a third node, a
spot instance in the lab's cloud (`gpufleet lab up --spot 1`), which pull
mode converges on its own. It must then have what the inventory knows of
it (gpufleet_spot, gpufleet_instance_id: its instance metrics), and its
guard must watch for the spot notice. Then each node's check-mode run
reports, one node's pull timer is stopped, drift is made by hand on
another, and the merged report must say exactly that: the stopped node
stale, the hand-made drift on its one host and resource, everything else
in sync. The fleet goes back to the session's two nodes afterwards."""

from __future__ import annotations

import datetime
import json
import subprocess

import pytest

from gpufleet.drift._model import EXIT_NOT_REPORTED
from gpufleet.lab import _object_store
from gpufleet.lab._podman import Podman
from plugins.plugin_utils._drift import EXIT_DRIFT
from tests.integration.conftest import GPU_NODE, LAB_UP, PLAIN_NODE, lab_container
from tests.integration.helpers import gpufleet
from tests.integration.roles.guard.metadata_node import start_metadata_service
from tests.support import pull
from tests.support.nodes import node_exec, recap, run_playbook
from tests.support.waiting import wait_for

# The session's fleet: one lab at a time (tests/integration/test_lab.py).
pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("lab-fleet")]

SPOT_NODE = "lab-node-3"
PULL_LAB_UP = ("--nodes", "3", "--gpu-stack", "1", "--spot", "1")
HOSTS = (GPU_NODE, PLAIN_NODE, SPOT_NODE)
# The spot node's instance metadata service (Alibaba Cloud's paths), on its
# loopback: the guard reads the notice there.
METADATA_PORT = 18172
NOTICE_FILE = "/run/gft-notice-aliyun"
GUARD_METRICS = "/var/lib/prometheus/node-exporter/gpufleet_guard.prom"
INSTANCE_METRICS = "/var/lib/prometheus/node-exporter/gpufleet_instance.prom"
# The hand-made drift, on the plain node: a line site.yml's chrony.conf
# does not have. Two resources report it, as in a push scan: the file
# differs, and chronyd runs the configuration from before it changed.
DRIFT_LINE = "server 127.0.0.9 iburst"
DRIFTED = {"gpufleet.cloud.baseline : Configure chrony",
           "gpufleet.cloud.baseline : Check that chrony runs its current configuration"}
CHRONY = "/etc/chrony/chrony.conf"
# A report older than this many minutes is stale. The stopped node's
# report is older by the time the others have run again; theirs end
# together, just before the merge.
MAX_AGE_MINUTES = 1


def sh(host: str, script: str) -> str:
    result = node_exec(lab_container(host), "sh", "-c", script)
    assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def set_up_pull(work, site: dict) -> None:
    """playbooks/pull.yml on every node, each with its own site settings:
    check mode on the converged nodes, a converge on the spot node."""
    extra = work / "pull-vars.json"
    extra.write_text(json.dumps({
        **pull.pull_vars({}),
        "pull_check_mode_enabled": f"{{{{ inventory_hostname != '{SPOT_NODE}' }}}}",
        "pull_site_extra_vars": "{{ test_pull_site[inventory_hostname] }}",
        "test_pull_site": site,
    }))
    result = run_playbook("playbooks/pull.yml", "-i", "inventories/lab", "-e", f"@{extra}")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert sorted(recap(result.stdout)) == sorted(HOSTS)


def start_runs(*hosts: str) -> None:
    """Each node's pull service started, as its timer starts it."""
    for host in hosts:
        sh(host, f"rm -f {pull.REPORT}; systemctl start --no-block gpufleet-pull.service")


def finished(*hosts: str, minutes: float = 15) -> dict[str, str]:
    """Wait for the runs to end; each host's service result."""
    def ended():
        states = {h: node_exec(lab_container(h), "systemctl", "is-active", "gpufleet-pull.service").stdout.strip()
                  for h in hosts}
        return states if all(s in ("inactive", "failed") for s in states.values()) else None

    wait_for(ended, f"the pull runs of {', '.join(hosts)}", minutes * 60, every=2)
    return {h: sh(h, "systemctl show -p Result --value gpufleet-pull.service").strip() for h in hosts}


def journal(host: str) -> str:
    return node_exec(lab_container(host), "journalctl", "-u", "gpufleet-pull.service", "-n", "80", "--no-pager").stdout


def node_report(host: str) -> dict:
    return json.loads(sh(host, f"cat {pull.REPORT}"))


def resources(records, host: str) -> set[str]:
    return {r["resource"] for r in records if r["host"] == host}


def spot_state(state: str) -> bool:
    shown = node_exec(lab_container(SPOT_NODE), "cat", GUARD_METRICS).stdout
    return f'gpufleet_guard_spot_state{{cloud="aliyun",state="{state}"}} 1' in shown


def merged(work, site: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """`gpufleet drift --from` over the lab's store, with the backups'
    bucket and credentials, as the fleet's controller reads it."""
    out = work / "from-store"
    result = gpufleet("drift", "-i", "inventories/lab", "--from", f"s3://{site['backup_repository_bucket']}/{pull.PREFIX}",
                      "--endpoint", f"http://{Podman().bridge_gateway()}:{_object_store.PORT}",
                      "--region", "us-east-1", "--max-age", str(MAX_AGE_MINUTES), "--quiet",
                      "--output-dir", str(out), "--history", str(out / "history.jsonl"),
                      env={"AWS_ACCESS_KEY_ID": site["backup_s3_access_key_id"],
                           "AWS_SECRET_ACCESS_KEY": site["backup_s3_secret_access_key"]})
    report = out / "report.json"
    assert report.exists(), result.stdout + result.stderr
    return result, json.loads(report.read_text())


@pytest.fixture(scope="module")
def pull_fleet(first_converge, tmp_path_factory):
    """The session's fleet with the spot node added, pull mode's repository
    on every node; the fleet back to the session's two nodes afterwards.
    Yields (work directory, each host's site settings, the session's
    clean push scan)."""
    for run in (first_converge.first, first_converge.second):
        assert run.returncode == 0, run.stdout[-3000:]
    up = gpufleet("lab", "up", *PULL_LAB_UP)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        work = tmp_path_factory.mktemp("pull")
        bare = pull.repository(work)
        for host in HOSTS:
            pull.trust_host_cas(lab_container(host))
            pull.install_repository(lab_container(host), bare)
        site = {host: pull.site_vars(host) for host in HOSTS}
        # The spot node's guard reads its notice from the metadata service
        # on its loopback (a real instance's is at a link-local address).
        site[SPOT_NODE]["guard_metadata_endpoint"] = f"http://127.0.0.1:{METADATA_PORT}"
        start_metadata_service(lab_container(SPOT_NODE), "aliyun", METADATA_PORT, NOTICE_FILE)
        yield work, site, first_converge.report
    finally:
        down = gpufleet("lab", "up", *LAB_UP)
        assert down.returncode == 0, down.stdout + down.stderr


def test_pull_mode_converges_a_spot_node_and_the_fleet_reports_through_the_store(pull_fleet):
    work, site, push = pull_fleet
    # Pull mode on every node: the spot node converges itself from
    # nothing; the converged nodes report (check mode).
    set_up_pull(work, site)
    start_runs(GPU_NODE, SPOT_NODE)
    results = finished(GPU_NODE, SPOT_NODE)
    for host, result in results.items():
        assert result == "success", f"{host}: {result}\n{journal(host)}"
    gpu_report = node_report(GPU_NODE)
    # The same resources a push scan of the node read (the session's clean scan).
    assert resources(gpu_report["records"], GPU_NODE) == resources(push["records"], GPU_NODE)
    assert {r["state"] for r in gpu_report["records"]} == {"in-sync"}, \
        [(r["resource"], r["state"]) for r in gpu_report["records"] if r["state"] != "in-sync"]

    # The spot node, converged in pull mode, knows what the inventory knows
    # of it (its instance metrics), and its guard watches for the notice.
    instance = sh(SPOT_NODE, f"cat {INSTANCE_METRICS}")
    for label in (f'node="{SPOT_NODE}"', 'instance_id="i-lab0003"', 'provider="aliyun"', 'spot="true"'):
        assert label in instance, instance
    guard = json.loads(sh(SPOT_NODE, "cat /etc/gpufleet/guard/config.json"))
    assert guard["spot"] is True and guard["cloud"] == "aliyun", guard
    wait_for(lambda: spot_state("clear"), "the spot node's guard reading no notice", 90)
    # Alibaba Cloud's notice: the instance's termination time, in UTC.
    deadline = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)
    sh(SPOT_NODE, f"printf '%s' '{deadline.strftime('%Y-%m-%dT%H:%M:%SZ')}' > {NOTICE_FILE}")
    try:
        wait_for(lambda: spot_state("notice"), "the spot node's guard seeing the notice", 90)
    finally:
        sh(SPOT_NODE, f"rm -f {NOTICE_FILE}")
    status = gpufleet("guard", "status", "-i", "inventories/lab", "--limit", SPOT_NODE, "--format", "json", "--quiet")
    (node,) = json.loads(status.stdout)["nodes"]
    assert node["host"] == SPOT_NODE and node["spot"] != "off", node

    # The GPU-stack node's timer stopped: its report only ages. Drift by
    # hand on the plain node; the spot node now in check mode too, switched
    # in its settings file as the Molecule pull scenario does (a push run of
    # the role for it would cost a minute of this test).
    sh(GPU_NODE, "systemctl stop gpufleet-pull.timer")
    stale_since = datetime.datetime.fromisoformat(gpu_report["finished"])
    sh(PLAIN_NODE, f"cp -p {CHRONY} {CHRONY}.test-saved && echo '{DRIFT_LINE}' >> {CHRONY}")
    try:
        sh(SPOT_NODE, "python3 -c 'import json; p = \"/etc/gpufleet/pull.json\"; c = json.load(open(p)); "
                      "c[\"check\"] = True; json.dump(c, open(p, \"w\"))'")
        start_runs(PLAIN_NODE, SPOT_NODE)
        results = finished(PLAIN_NODE, SPOT_NODE)
    finally:
        sh(PLAIN_NODE, f"mv {CHRONY}.test-saved {CHRONY}")
    # A check run that finds drift succeeds: the drift is in its report.
    for host, result in results.items():
        assert result == "success" and node_report(host)["records"], f"{host}: {result}\n{journal(host)}"
    textfile = sh(PLAIN_NODE, f"cat {pull.TEXTFILE}")
    assert f'gpufleet_pull_drift_resources{{state="drifted"}} {len(DRIFTED)}' in textfile, textfile

    def old_enough():
        age = datetime.datetime.now(datetime.timezone.utc) - stale_since
        return age > datetime.timedelta(minutes=MAX_AGE_MINUTES, seconds=5)

    wait_for(old_enough, "the stopped node's report older than --max-age", MAX_AGE_MINUTES * 60 + 30, every=2)
    result, report = merged(work, site[PLAIN_NODE])

    assert sorted(report["hosts"]) == sorted(HOSTS), report["hosts"].keys()
    assert result.returncode == EXIT_DRIFT | EXIT_NOT_REPORTED, result.stdout + result.stderr
    wrong = {(r["host"], r["resource"], r["state"]) for r in report["records"] if r["state"] != "in-sync"}
    assert wrong == {(GPU_NODE, "pull report", "could-not-verify"),
                     *((PLAIN_NODE, resource, "drifted") for resource in DRIFTED)}, wrong
    (stale,) = [r for r in report["records"] if r["host"] == GPU_NODE]
    assert stale["pull"] == "stale" and f"older than --max-age {MAX_AGE_MINUTES} minutes" in stale["message"], stale
    (conf,) = [r for r in report["records"] if r["resource"] == "gpufleet.cloud.baseline : Configure chrony"
               and r["host"] == PLAIN_NODE]
    assert DRIFT_LINE in json.dumps(conf["diff"]), conf
    # The plain node read what a push scan of it reads; the spot node, all
    # of it in sync after converging itself.
    assert resources(report["records"], PLAIN_NODE) == resources(push["records"], PLAIN_NODE)
    assert resources(report["records"], SPOT_NODE) and \
        {r["state"] for r in report["records"] if r["host"] == SPOT_NODE} == {"in-sync"}
    # Secrets stay out of the merged report, as out of a push scan's.
    text = (work / "from-store" / "report.json").read_text()
    for host in HOSTS:
        assert site[host]["backup_s3_secret_access_key"] not in text
        assert site[host]["backup_password"] not in text
