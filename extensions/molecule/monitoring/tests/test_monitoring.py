"""What a node converged by gpufleet.cloud.monitoring serves, and what a real
Prometheus server makes of it: the server (from Debian's prometheus package)
runs on this machine's loopback and scrapes each node's node_exporter
through the port the node publishes on its own loopback address."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    ansible_playbook,
    assert_dropin_moved_aside,
    assert_file,
    assert_package,
    assert_unit_running,
    prometheus_tool,
)

from tests.support.prometheus import serve

TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
# Mirrors molecule.yml: where each node publishes node_exporter.
TARGETS = {12: "127.0.0.71:9100", 13: "127.0.0.72:9100"}
JOB = "gpufleet-node"
EXPORT = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "export"
FETCH = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"


def node_address(host) -> str:
    return host.check_output("ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1")


def scrape(host) -> str:
    """node_exporter's metrics, fetched inside the node from its own address."""
    return host.check_output("python3 -c %s %s", FETCH, f"http://{node_address(host)}:9100/metrics")


def test_node_exporter_listens_only_on_the_configured_address(host):
    assert_package(host, "prometheus-node-exporter")
    assert_unit_running(host, "prometheus-node-exporter")
    address = node_address(host)
    assert_file(host, "/etc/default/prometheus-node-exporter", contains=(f"--web.listen-address={address}:9100",))
    listeners = host.check_output("ss -Hltn 'sport = :9100'")
    assert f"{address}:9100" in listeners, listeners
    assert "0.0.0.0:9100" not in listeners and "*:9100" not in listeners, listeners


# The exporter's address default comes from the network facts.
EXPORTER_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.setup:
        gather_subset: [min, network]
    - ansible.builtin.package_facts:
    - ansible.builtin.include_role:
        name: gpufleet.cloud.monitoring
        tasks_from: node_exporter
"""
RUNNING_TASK = "TASK [gpufleet.cloud.monitoring : Check that node_exporter runs its current configuration]"
BY_HAND = "/etc/systemd/system/prometheus-node-exporter.service.d/by-hand.conf"


def exporter_argv(host) -> list[str]:
    pid = host.check_output("systemctl show -p MainPID --value prometheus-node-exporter")
    return host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()


def test_an_exporter_started_with_other_flags_is_drift_and_a_run_restarts_it(rerun_node, tmp_path):
    host = rerun_node
    # The defaults file stays as the role wrote it; the exporter that runs
    # was started by a drop-in with another flag, and the drop-in is gone.
    host.run_test(f"mkdir -p {os.path.dirname(BY_HAND)} && printf '[Service]\\nExecStart=\\n"
                  f"ExecStart=/usr/bin/prometheus-node-exporter $ARGS --no-collector.hwmon\\n' > {BY_HAND}"
                  " && systemctl daemon-reload && systemctl restart prometheus-node-exporter"
                  f" && rm {BY_HAND} && systemctl daemon-reload")
    assert "--no-collector.hwmon" in exporter_argv(host)
    play = tmp_path / "node_exporter.yml"
    play.write_text(EXPORTER_PLAY)
    try:
        check = ansible_playbook(play, host.backend.name, options=("--check", "--diff"))
        assert check.returncode == 0, check.stdout + check.stderr
        task = check.stdout.split(RUNNING_TASK, 1)[1].split("TASK [", 1)[0]
        assert f"changed: [{host.backend.name}]" in task and "--no-collector.hwmon" in task, task
        assert "--no-collector.hwmon" in exporter_argv(host), "check mode restarted nothing"
    finally:
        run = ansible_playbook(play, host.backend.name)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "--no-collector.hwmon" not in exporter_argv(host)
    assert_unit_running(host, "prometheus-node-exporter")


def test_exporter_ports_are_declared_for_the_security_report(host):
    declared = json.loads(assert_file(host, "/etc/gpufleet/ports.d/monitoring.json"))
    assert declared == [{"port": 9100, "proto": "tcp", "what": "prometheus-node-exporter"}]


def test_textfile_metrics_are_served(host):
    host.run_test("sh -c %s", f"echo 'gft_probe_value 42' > {TEXTFILE_DIR}/gft_probe.prom")
    try:
        metrics = scrape(host)
    finally:
        host.run("rm -f %s", f"{TEXTFILE_DIR}/gft_probe.prom")
    assert "gft_probe_value 42" in metrics
    assert 'node_textfile_scrape_error 0' in metrics


def test_nvidia_smi_exporter_says_honestly_that_there_is_no_gpu(host, major):
    assert host.service("gpufleet-nvsmi-exporter.timer").is_enabled
    assert host.service("gpufleet-nvsmi-exporter.timer").is_running
    host.run_test("systemctl start gpufleet-nvsmi-exporter.service")
    prom = assert_file(host, f"{TEXTFILE_DIR}/gpufleet_gpu.prom")
    # Debian 13 has nvidia-smi without a driver (exit 9); Debian 12 has none.
    status = "no_driver" if major == 13 else "nvidia_smi_missing"
    assert "gpufleet_gpu_exporter_up 0" in prom
    assert f'gpufleet_gpu_exporter_status{{status="{status}"' in prom, prom
    assert "gpufleet_gpu_count 0" in prom
    # No GPU: no readings at all, not zeros.
    assert "gpufleet_gpu_utilization_percent" not in prom
    assert "gpufleet_gpu_temperature_celsius" not in prom


def test_a_drop_in_that_slowed_the_nvidia_smi_exporter_is_moved_aside(host):
    assert_dropin_moved_aside(host, "gpufleet-nvsmi-exporter.timer", "local.conf", "OnUnitActiveSec=1d")


def test_inventory_metrics(host, major):
    prom = assert_file(host, f"{TEXTFILE_DIR}/gpufleet_instance.prom")
    if major == 12:
        assert 'provider="aws"' in prom and 'instance_type="g5.xlarge"' in prom and 'gpu_count="1"' in prom
        assert "gpufleet_instance_price_per_hour{" in prom and '} 1.006' in prom
    else:
        assert 'provider="aliyun"' in prom and 'spot="true"' in prom and 'gpu_count="0"' in prom
        assert "gpufleet_instance_price_per_hour" not in prom, "an unpriced type must not get a price"


def test_exported_rules_follow_the_thresholds():
    rules = (EXPORT / "gpufleet.rules.yml").read_text()
    assert "gpufleet:gpu_temperature:celsius > 80" in rules
    assert "gpufleet_backup_last_success_timestamp_seconds > 1800" in rules
    assert f'up{{job="{JOB}"}} == 0' in rules
    assert "for: 120m" in rules
    assert "> 7200" in rules.split("alert: GpufleetPullStale", 1)[1].split("- alert:", 1)[0]


def test_promtool_check_rules():
    out = subprocess.run(
        [prometheus_tool("promtool"), "check", "rules", "gpufleet.rules.yml"],
        cwd=EXPORT, capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 37 rules found" in out.stdout


def test_promtool_unit_tests_fire_every_alert():
    tests = (EXPORT / "gpufleet.rules.test.yml").read_text()
    rules = (EXPORT / "gpufleet.rules.yml").read_text()
    alerts = [line.split(":", 1)[1].strip() for line in rules.splitlines() if line.strip().startswith("- alert:")]
    assert len(alerts) == 28
    for alert in alerts:
        assert f"alertname: {alert}" in tests, f"no promtool test for {alert}"
    out = subprocess.run(
        [prometheus_tool("promtool"), "test", "rules", "gpufleet.rules.test.yml"],
        cwd=EXPORT, capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboard_is_grafana_json():
    dashboard = json.loads((EXPORT / "gpufleet-fleet.dashboard.json").read_text())
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"GPU utilisation per node", "GPU memory used per node", "Spend per hour by cloud", "Backup age"} <= titles


# ---- a real Prometheus server -------------------------------------------------


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A Prometheus server on 127.0.0.1 that scrapes both nodes every second
    with the exported rules loaded; stopped afterwards."""
    work = tmp_path_factory.mktemp("prometheus")
    with serve(work, JOB, list(TARGETS.values()), rule_files=[EXPORT / "gpufleet.rules.yml"],
               binary=Path(prometheus_tool("prometheus"))) as server:
        yield server


def test_prometheus_scrapes_every_node(prometheus):
    targets = prometheus.api("targets")["activeTargets"]
    assert sorted(t["labels"]["instance"] for t in targets) == sorted(TARGETS.values())
    assert all(t["health"] == "up" for t in targets), targets
    for target in TARGETS.values():
        assert prometheus.query(f'node_uname_info{{instance="{target}"}}'), f"no node metrics from {target}"


def test_prometheus_sees_the_textfile_metrics(prometheus):
    status = {r["metric"]["instance"]: r["metric"]["status"] for r in prometheus.query("gpufleet_gpu_exporter_status == 1")}
    assert status == {TARGETS[12]: "nvidia_smi_missing", TARGETS[13]: "no_driver"}
    info = {r["metric"]["instance"]: r["metric"]["provider"] for r in prometheus.query("gpufleet_instance_info")}
    assert info == {TARGETS[12]: "aws", TARGETS[13]: "aliyun"}
    price = prometheus.query("gpufleet_instance_price_per_hour")
    assert [(r["metric"]["instance"], r["value"][1]) for r in price] == [(TARGETS[12], "1.006")]


def test_prometheus_evaluates_the_rules(prometheus):
    # Wait for an evaluation that saw a scrape of both nodes: on a busy
    # machine the first evaluations can come before the first scrape.
    deadline = time.monotonic() + 60
    while True:
        groups = prometheus.api("rules")["groups"]
        alerts = prometheus.api("alerts")["alerts"]
        pending = [a for a in alerts if a["labels"]["alertname"] == "GpufleetGpuMetricsMissing"]
        evaluated = groups and all(rule.get("lastEvaluation", "").startswith("20") for g in groups for rule in g["rules"])
        if (evaluated and pending) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert {g["name"] for g in groups} == {"gpufleet-gpu-recording", "gpufleet-repair-recording", "gpufleet-alerts",
                                           "gpufleet-guard", "gpufleet-pull"}
    assert all(rule["health"] == "ok" for g in groups for rule in g["rules"]), groups
    # The node the inventory gives a GPU has no GPU metrics: that alert is
    # pending there (it fires after 15 minutes), and only there.
    assert [(a["labels"]["instance"], a["state"]) for a in pending] == [(TARGETS[12], "pending")]


def test_dashboard_queries_run_on_prometheus(prometheus):
    dashboard = json.loads((EXPORT / "gpufleet-fleet.dashboard.json").read_text())
    results = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            results[panel["title"]] = prometheus.query(target["expr"])
    assert results["Fleet spend per hour"][0]["value"][1] == "1.006"
    assert results["Unpriced nodes"][0]["value"][1] == "1"
    assert results["Nodes without GPU metrics"][0]["value"][1] == "2"
