"""What a node converged by gpufleet.cloud.node_health checks, and how
honestly it reports what a GPU-less container cannot show."""

from __future__ import annotations

import base64
import datetime
import json

import pytest
from conftest import ansible_playbook, assert_file, container, project_dir

REPORT = "/var/lib/gpufleet/health/report.json"
METRICS = "/var/lib/prometheus/node-exporter/gpufleet_health.prom"
GPU_CHECKS = ["driver_version", "persistence_mode", "xid", "sxid", "ecc", "row_remap", "pcie_link", "nccl_busbw"]


@pytest.fixture(scope="module")
def report(host):
    """Run the checks now through systemd, as the timer does."""
    run = host.run("systemctl start gpufleet-health.service")
    return run.rc, json.loads(host.file(REPORT).content_string)


def test_script_config_and_timer(host, major):
    assert_file(host, "/usr/local/lib/gpufleet/gpufleet-health.py")
    config = json.loads(assert_file(host, "/etc/gpufleet/health.json"))
    assert config["expected_gpu_count"] == (2 if major == 13 else 0)
    assert config["driver_version"] == ("550" if major == 13 else "")
    assert config["nccl"]["enabled"] is False
    timer = host.service("gpufleet-health.timer")
    assert timer.is_enabled and timer.is_running


def test_a_node_without_gpus_passes_and_says_what_did_not_apply(host, major, report):
    if major != 12:
        pytest.skip("the Debian 12 node is the one with no GPU expected")
    rc, data = report
    assert rc == 0
    assert data["status"] == "pass"
    assert (data["gpus_expected"], data["gpus_found"]) == (0, 0)
    assert data["nvidia_smi"]["status"] == "nvidia_smi_missing"
    checks = {c["check"]: c for c in data["checks"]}
    assert checks["gpu_count"]["result"] == "pass"
    for name in GPU_CHECKS:
        assert checks[name]["result"] == "skip", checks[name]
        assert "no GPU on this node" in checks[name]["detail"]


def test_a_promised_gpu_the_node_lacks_is_a_failure(host, major, report):
    if major != 13:
        pytest.skip("the Debian 13 node is the one the inventory gives two GPUs")
    rc, data = report
    # The unit fails on purpose, so `systemctl --failed` shows the node.
    assert rc != 0
    assert host.service("gpufleet-health.service").systemd_properties["Result"] == "exit-code"
    assert data["status"] == "fail"
    assert (data["gpus_expected"], data["gpus_found"]) == (2, 0)
    assert data["nvidia_smi"]["status"] == "no_driver"
    checks = {c["check"]: c for c in data["checks"]}
    assert checks["gpu_count"]["result"] == "fail"
    assert "promises 2 GPU(s)" in checks["gpu_count"]["detail"]
    # What could not be checked says so: never a pass.
    for name in GPU_CHECKS:
        assert checks[name]["result"] == "unknown", checks[name]
    assert "could not check" in checks["driver_version"]["detail"]
    # A container cannot read the kernel log: the XID check says that.
    assert "no kernel log is readable" in checks["xid"]["detail"]


def test_what_could_not_be_read_is_an_unknown_fault_never_a_tripped_one(host, major, report):
    data = report[1]
    if major == 12:
        # No GPU expected or present: no kernel log read, no fault.
        assert data["faults"] == []
        return
    faults = {f["kind"]: f for f in data["faults"]}
    assert set(faults) == {"kernel_log_unreadable", "gpus_unreadable"}, data["faults"]
    for fault in faults.values():
        assert (fault["class"], fault["step"], fault["tripped"]) == ("unknown", "none", False), fault
    metrics = assert_file(host, METRICS)
    assert ('gpufleet_health_fault_tripped{kind="gpus_unreadable",code="",pci="",class="unknown",step="none"} 0'
            in metrics)


def test_faults_in_a_kern_log_are_classified_by_the_installed_library(host, major):
    """The node's own script and library (gpufleet_gpu_faults.py, which
    _common installed) on lines shaped like the driver's, with syslog's
    times: a code of the catalogue trips its class, an application error
    below its threshold does not, a code past the catalogue is unknown."""
    if major != 13:
        pytest.skip("the Debian 13 node is the one the inventory gives GPUs")
    now = datetime.datetime.now(datetime.timezone.utc)

    def line(minutes_ago, text):
        return f"{(now - datetime.timedelta(minutes=minutes_ago)).isoformat()} node kernel: NVRM: Xid {text}"

    log = "\n".join([
        line(5, "(PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        line(3, "(PCI:0000:3b:00): 13, pid=4242, name=python3, Graphics Exception: ESR 0x50e648=0x0"),
        line(2, "(PCI:0000:3b:00): 240, pid=1, a code no catalogue lists"),
        line(90, "(PCI:0000:3b:00): 119, pid=1, Timeout after 6s of waiting for RPC response from GPU0 GSP!"),
    ]) + "\n"
    config = json.loads(host.file("/etc/gpufleet/health.json").content_string)
    config.update(kernel_log="/tmp/gft-kern.log", report="/tmp/gft-report.json", textfile="/tmp/gft.prom")
    for path, text in (("/tmp/gft-kern.log", log), ("/tmp/gft-health.json", json.dumps(config))):
        encoded = base64.b64encode(text.encode()).decode()
        assert host.run(f"echo {encoded} | base64 -d > {path}").rc == 0
    run = host.run("python3 /usr/local/lib/gpufleet/gpufleet-health.py --config /tmp/gft-health.json")
    assert run.rc == 1, run.stderr  # the promised GPUs are missing, and XID 79
    data = json.loads(host.file("/tmp/gft-report.json").content_string)
    rows = {(f["kind"], f["code"]): (f["class"], f["count"], f["tripped"]) for f in data["faults"]}
    assert rows == {
        ("xid", 79): ("RESTART_BM", 1, True),
        ("xid", 13): ("RESTART_APP", 1, False),
        ("xid", 240): ("unknown", 1, False),
        ("xid", 119): ("RESET_GPU", 0, False),
        ("gpus_unreadable", None): ("unknown", 1, False),
    }, data["faults"]
    checks = {c["check"]: c for c in data["checks"]}
    assert "XID 79 (RESTART_BM) on 0000:3b:00 x1" in checks["xid"]["detail"]


def test_results_are_metrics(host, report):
    data = report[1]
    metrics = assert_file(host, METRICS)
    for check in data["checks"]:
        assert f'gpufleet_health_check{{check="{check["check"]}",result="{check["result"]}"}} 1' in metrics
    assert f"gpufleet_health_gpus_expected {data['gpus_expected']}" in metrics
    assert "gpufleet_health_last_run_timestamp_seconds " in metrics


def test_health_playbook_collects_one_fleet_report(tmp_path):
    nodes = [container(12), container(13)]
    result = ansible_playbook(project_dir() / "playbooks" / "health.yml", *nodes, extra_vars={"health_report_dir": str(tmp_path)})
    out = result.stdout + result.stderr
    # One node fails its checks, so the run fails, after writing the report.
    assert result.returncode == 2, out
    assert f"Failing nodes: {container(13)}" in out, out
    fleet = json.loads((tmp_path / "health-report.json").read_text())
    assert fleet["status"] == "fail"
    assert {name: node["status"] for name, node in fleet["nodes"].items()} == {nodes[0]: "pass", nodes[1]: "fail"}
    assert f"{container(13)}: FAIL" in out
