"""The health check script the node_health role installs."""

from __future__ import annotations

import datetime
import json
import sys

import pytest

from tests.unit.roles.conftest import load_script

health = load_script("roles/node_health/files/gpufleet-health.py")
READ_KERNEL_LOG = health.read_kernel_log


def gpu(index=0, **over):
    base = {
        "index": str(index),
        "pci.bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "driver_version": "550.127.05",
        "persistence_mode": "Enabled",
        "ecc.mode.current": "Enabled",
        "ecc.errors.uncorrected.volatile.total": "0",
        "pcie.link.gen.current": "5",
        "pcie.link.gen.max": "5",
        "pcie.link.width.current": "16",
        "pcie.link.width.max": "16",
        "pstate": "P0",
    }
    base.update(over)
    return base


def config(tmp_path, nvidia_smi, expected, **over):
    cfg = {
        "expected_gpu_count": expected,
        "driver_version": "",
        "persistence_mode": True,
        "ecc_required": True,
        "ecc_max_uncorrected": 0,
        "pcie": True,
        "xid_window_minutes": 60,
        "xid_ignore": [13, 31, 43, 45],
        "nccl": {"enabled": False, "on_timer": False, "binary": "/nonexistent", "args": [], "min_busbw_gbps": 0.0},
        "nvidia_smi": nvidia_smi,
        "report": str(tmp_path / "report.json"),
        "textfile": str(tmp_path / "gpufleet_health.prom"),
    }
    cfg.update(over)
    return cfg


def by_check(report):
    return {c["check"]: c for c in report["checks"]}


@pytest.fixture(autouse=True)
def no_host_state(monkeypatch):
    """Keep the machine running the tests out of the results: no PCI GPUs,
    and a kernel log the test chooses."""
    monkeypatch.setattr(health, "pci_gpus", lambda: 0)
    monkeypatch.setattr(health, "read_kernel_log", lambda minutes, path="": ("", f"journald, last {minutes} min"))


# ---- GPU count ---------------------------------------------------------------


def test_no_gpu_expected_and_none_present_passes():
    r = health.check_gpu_count(0, "nvidia_smi_missing", "/usr/bin/nvidia-smi not found", [], 0)
    assert r["result"] == "pass" and "expects no GPU" in r["detail"]


def test_a_promised_gpu_that_is_missing_fails():
    r = health.check_gpu_count(2, "no_driver", "exit 9: couldn't communicate", [], 2)
    assert r["result"] == "fail"
    assert "promises 2 GPU(s)" in r["detail"] and "2 NVIDIA GPU(s) on the PCI bus" in r["detail"]
    assert r["data"] == {"expected": 2, "found": 0}


def test_fewer_gpus_than_promised_fails_and_unpromised_gpus_fail_too():
    assert health.check_gpu_count(8, "ok", "", [gpu(i) for i in range(7)], 8)["result"] == "fail"
    assert health.check_gpu_count(0, "ok", "", [gpu()], 1)["result"] == "fail"
    assert health.check_gpu_count(2, "ok", "", [gpu(0), gpu(1)], 2)["result"] == "pass"


# ---- the per-GPU checks --------------------------------------------------------


@pytest.mark.parametrize(
    ("pin", "version", "outcome"),
    [("550", "550.127.05", "pass"), ("550.127.05", "550.127.05", "pass"), ("550", "5501.1", "fail"),
     ("535", "550.127.05", "fail"), ("", "550.127.05", "skip")],
)
def test_driver_pin(pin, version, outcome):
    assert health.check_driver(pin, [gpu(driver_version=version)])["result"] == outcome


def test_persistence_mode():
    assert health.check_persistence(True, [gpu(0), gpu(1, persistence_mode="Disabled")])["result"] == "fail"
    assert health.check_persistence(True, [gpu(0)])["result"] == "pass"
    assert health.check_persistence(False, [gpu(0, persistence_mode="Disabled")])["result"] == "skip"


def test_ecc():
    errors = health.check_ecc(True, 0, [gpu(0), gpu(1, **{"ecc.errors.uncorrected.volatile.total": "4"})])
    assert errors["result"] == "fail" and "GPU 1: 4" in errors["detail"]
    assert health.check_ecc(True, 5, [gpu(0, **{"ecc.errors.uncorrected.volatile.total": "4"})])["result"] == "pass"
    assert health.check_ecc(True, 0, [gpu(0, **{"ecc.mode.current": "Disabled"})])["result"] == "fail"
    assert health.check_ecc(False, 0, [gpu(0, **{"ecc.mode.current": "Disabled"})])["result"] == "pass"
    assert health.check_ecc(True, 0, [gpu(0, **{"ecc.mode.current": "[N/A]"})])["result"] == "skip"


def test_pcie_link():
    assert health.check_pcie(True, [gpu(0)])["result"] == "pass"
    narrow = health.check_pcie(True, [gpu(0, **{"pcie.link.width.current": "8"})])
    assert narrow["result"] == "fail" and "x8 of x16" in narrow["detail"]
    slow_busy = health.check_pcie(True, [gpu(0, **{"pcie.link.gen.current": "3"})])
    assert slow_busy["result"] == "fail" and "gen3 of gen5" in slow_busy["detail"]
    # An idle GPU trains its link down: the speed cannot be judged then.
    idle = health.check_pcie(True, [gpu(0, pstate="P8", **{"pcie.link.gen.current": "1"})])
    assert idle["result"] == "unknown" and "idle" in idle["detail"]
    assert health.check_pcie(False, [gpu(0, **{"pcie.link.width.current": "8"})])["result"] == "skip"


KERNEL_LOG = """\
NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.
NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.
NVRM: Xid (PCI:0000:5e:00): 13, pid=99, Graphics Exception
"""


def test_xid_events_are_counted_and_ignored_codes_do_not_fail(monkeypatch):
    monkeypatch.setattr(health, "read_kernel_log", lambda minutes, path="": (KERNEL_LOG, "journald, last 60 min"))
    read = health.read_kernel_events(60, "")
    r, events = health.check_xid(read, 60, [13], True, "", 1.0e9)
    # Each code with its class in NVIDIA's catalogue.
    assert r["result"] == "fail" and "XID 79 (RESTART_BM) on 0000:3b:00 x2" in r["detail"]
    assert events == {("0000:3b:00", "79"): 2, ("0000:5e:00", "13"): 1}
    r = health.check_xid(read, 60, [13, 79], True, "", 1.0e9)[0]
    assert r["result"] == "pass" and "ignored: [13, 79]" in r["detail"]


def test_the_xid_check_counts_only_its_own_window():
    """The log is read as far back as the longest fault window; the check
    counts the lines of its own window, and undated lines always."""
    now = 1_800_000_000.0
    lines = [{"kind": "xid", "code": 79, "pci": "0000:3b:00", "time": now - 3 * 3600},
             {"kind": "xid", "code": 48, "pci": "0000:3b:00", "time": now - 59 * 60},
             {"kind": "xid", "code": 94, "pci": "0000:3b:00", "time": None}]
    r, events = health.check_xid((lines, "journald, last 180 min"), 60, [], True, "", now)
    assert events == {("0000:3b:00", "48"): 1, ("0000:3b:00", "94"): 1}
    assert r["result"] == "fail" and "XID 79" not in r["detail"]


def test_an_unreadable_kernel_log_is_unknown_not_pass(monkeypatch):
    monkeypatch.setattr(health, "read_kernel_log", lambda minutes, path="": (None, "no kernel log is readable here"))
    r, events = health.check_xid(health.read_kernel_events(60, ""), 60, [], True, "", 1.0e9)
    assert (r["result"], events) == ("unknown", {})


def test_a_kernel_log_file_is_read_instead_of_journald(tmp_path, monkeypatch):
    monkeypatch.undo()
    monkeypatch.setattr(health, "run", lambda argv, timeout: pytest.fail(f"ran {argv}"))
    log = tmp_path / "kern.log"
    log.write_text("2026-12-06T22:10:00.123456+00:00 gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
                   "GPU has fallen off the bus.\n")
    assert health.read_kernel_log(60, str(log)) == (log.read_text(), str(log))
    text, source = health.read_kernel_log(60, str(tmp_path / "missing.log"))
    assert text is None and "missing.log is not readable" in source


def test_kernel_log_without_kernel_messages_is_not_readable(monkeypatch):
    """journald answers but holds no kernel line for this boot (a container)
    and dmesg is refused: that is 'cannot read', not 'no XID'."""
    monkeypatch.undo()
    calls = []

    def run(argv, timeout):
        calls.append(argv[0])
        if argv[0] == "journalctl":
            return 0, ""
        return 1, "dmesg: read kernel buffer failed: Operation not permitted"

    monkeypatch.setattr(health, "run", run)
    text, source = health.read_kernel_log(60)
    assert text is None and "no kernel log is readable" in source
    assert calls == ["journalctl", "dmesg"]


def test_nccl_bandwidth(tmp_path):
    binary = tmp_path / "all_reduce_perf"
    binary.write_text(f"#!{sys.executable}\nimport sys\nprint('# Avg bus bandwidth    : 182.37 ')\nprint(sys.argv[1:])\n")
    binary.chmod(0o755)
    cfg = {"enabled": True, "binary": str(binary), "args": ["-b", "1G"], "min_busbw_gbps": 150.0}
    r, busbw = health.check_nccl(cfg, True, [gpu(0), gpu(1)])
    assert (r["result"], busbw) == ("pass", 182.37)
    r = health.check_nccl(dict(cfg, min_busbw_gbps=200.0), True, [gpu(0)])[0]
    assert r["result"] == "fail"
    assert health.check_nccl(dict(cfg, enabled=False), True, [gpu(0)])[0]["result"] == "skip"
    assert health.check_nccl(cfg, False, [gpu(0)])[0]["result"] == "skip"
    missing = health.check_nccl(dict(cfg, binary=str(tmp_path / "nope")), True, [gpu(0)])[0]
    assert missing["result"] == "unknown"


# ---- whole runs ------------------------------------------------------------------


def test_container_without_gpu_and_none_expected(tmp_path):
    report = health.run_checks(config(tmp_path, str(tmp_path / "nvidia-smi"), 0), nccl=False)
    assert report["status"] == "pass"
    checks = by_check(report)
    assert checks["gpu_count"]["result"] == "pass"
    for name in ("driver_version", "persistence_mode", "xid", "sxid", "ecc", "row_remap", "pcie_link", "nccl_busbw"):
        assert checks[name]["result"] == "skip" and "no GPU on this node" in checks[name]["detail"]


def test_promised_gpus_without_a_driver(tmp_path, fake_nvidia_smi):
    smi = fake_nvidia_smi(rc=9, message="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    report = health.run_checks(config(tmp_path, smi, 2), nccl=False)
    assert report["status"] == "fail"
    assert report["nvidia_smi"]["status"] == "no_driver"
    checks = by_check(report)
    assert checks["gpu_count"]["result"] == "fail"
    for name in ("driver_version", "persistence_mode", "ecc", "row_remap", "pcie_link", "nccl_busbw"):
        assert checks[name]["result"] == "unknown" and "could not check" in checks[name]["detail"]
    # The kernel log still explains a lost GPU; the fixture's log is empty.
    assert checks["xid"]["result"] == "pass"


def test_healthy_gpu_node(tmp_path, fake_nvidia_smi):
    smi = fake_nvidia_smi([gpu(0), gpu(1)])
    report = health.run_checks(config(tmp_path, smi, 2, driver_version="550"), nccl=False)
    assert report["status"] == "pass", report
    assert report["gpus_found"] == 2
    assert by_check(report)["nccl_busbw"]["result"] == "skip"


def test_main_writes_report_and_metrics(tmp_path, fake_nvidia_smi, capsys):
    cfg = config(tmp_path, fake_nvidia_smi(rc=9, message="no driver"), 4)
    (tmp_path / "health.json").write_text(json.dumps(cfg))
    assert health.main(["--config", str(tmp_path / "health.json"), "--print"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "report.json").read_text())
    metrics = (tmp_path / "gpufleet_health.prom").read_text()
    assert 'gpufleet_health_check{check="gpu_count",result="fail"} 1' in metrics
    assert 'gpufleet_health_check{check="gpu_count",result="pass"} 0' in metrics
    assert 'gpufleet_health_check{check="ecc",result="unknown"} 1' in metrics
    assert "gpufleet_health_gpus_expected 4" in metrics
    assert "gpufleet_health_gpus_found 0" in metrics


def test_metrics_carry_xid_counts_and_bandwidth():
    report = {
        "checks": [health.result("xid", "fail", "XID 79")],
        "gpus_expected": 1,
        "gpus_found": 1,
        "xid_events": [{"pci": "0000:3b:00", "xid": 79, "count": 2}],
        "faults": [],
        "nccl_busbw_gbps": 182.37,
    }
    text = health.metrics(report, 5.0)
    assert 'gpufleet_health_xid_events{pci="0000:3b:00",xid="79"} 2' in text
    assert "gpufleet_health_nccl_busbw_gbps 182.37" in text
    assert sum(1 for line in text.splitlines() if line.startswith("gpufleet_health_check{")) == 4


# ---- faults, classified (report only) ---------------------------------------------

NOW = 1_800_000_000.0


def kern_log_line(minutes_ago: float, text: str) -> str:
    """A line as Debian's rsyslog writes /var/log/kern.log."""
    stamp = datetime.datetime.fromtimestamp(NOW - minutes_ago * 60, datetime.timezone.utc)
    return f"{stamp.isoformat(timespec='microseconds')} gpu-1 kernel: {text}"


# Lines shaped like the driver's, for codes of several catalogue classes.
FAILING_NODE_LOG = "\n".join([
    kern_log_line(5, "NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
    kern_log_line(4, "NVRM: GPU 0000:19:00.0: GPU has fallen off the bus."),
    kern_log_line(30, "NVRM: Xid (PCI:0000:18:00): 94, pid=2211, name=python3, Contained: SM (0x1). RST: No, D-RST: No"),
    *(kern_log_line(m, "NVRM: Xid (PCI:0000:18:00): 13, pid=2211, name=python3, Graphics Exception: ESR 0x50e648=0x0")
      for m in (10, 20, 40)),
    # Outside RESET_GPU's 60 minutes: read, counted 0, not tripped.
    kern_log_line(120, "NVRM: Xid (PCI:0000:18:00): 119, pid=1, Timeout after 6s of waiting for RPC response from GPU0 GSP!"),
    # Past the catalogue: unknown, visible, never tripped.
    kern_log_line(1, "NVRM: Xid (PCI:0000:18:00): 240, pid=1, a code no catalogue lists"),
    kern_log_line(1, "e1000e 0000:00:1f.6 eth0: NIC Link is Up 1000 Mbps Full Duplex"),
]) + "\n"


def test_a_failing_node_reports_each_fault_with_its_class_threshold_and_window(tmp_path, fake_nvidia_smi, monkeypatch):
    monkeypatch.setattr(health, "read_kernel_log", READ_KERNEL_LOG)
    monkeypatch.setattr(health, "run", lambda argv, timeout: pytest.fail(f"read {argv}, not the configured file"))
    (tmp_path / "kern.log").write_text(FAILING_NODE_LOG)
    # Two GPUs promised, one answers, with uncorrectable ECC errors.
    smi = fake_nvidia_smi([gpu(0, **{"ecc.errors.uncorrected.volatile.total": "2"})])
    cfg = config(tmp_path, smi, 2, kernel_log=str(tmp_path / "kern.log"), xid_window_minutes=180,
                 fault_policy={"RESET_GPU": {"window_minutes": 60}}, xid_policy={"13": {"threshold": 4}})
    report = health.run_checks(cfg, nccl=False, now=NOW)
    found = {(f["kind"], f["code"], f["pci"]): f for f in report["faults"]}
    rows = {key: (f["class"], f["step"], f["count"], f["tripped"]) for key, f in found.items()}
    assert rows == {
        ("xid", 79, "0000:19:00"): ("RESTART_BM", "reboot", 1, True),
        ("xid", 94, "0000:18:00"): ("RESTART_APP", "restart_app", 1, False),
        # Three in the window, the code's own threshold 4.
        ("xid", 13, "0000:18:00"): ("RESTART_APP", "restart_app", 3, False),
        ("xid", 119, "0000:18:00"): ("RESET_GPU", "reset_gpu", 0, False),
        ("xid", 240, "0000:18:00"): ("unknown", "none", 1, False),
        ("gpu_missing", None, ""): ("RESTART_VM", "reboot", 1, True),
        ("ecc_uncorrectable", None, "00000000:18:00.0"): ("RESET_GPU", "reset_gpu", 1, True),
    }
    assert found[("xid", 13, "0000:18:00")]["threshold"] == 4
    assert found[("xid", 79, "0000:19:00")]["last"] == pytest.approx(NOW - 300)
    # The xid check reads its own 180 minutes, naming the classes.
    xid = by_check(report)["xid"]
    assert xid["result"] == "fail" and "XID 79 (RESTART_BM) on 0000:19:00 x1" in xid["detail"]
    assert "XID 240 (unknown) on 0000:18:00 x1" in xid["detail"] and str(tmp_path / "kern.log") in xid["detail"]

    text = health.metrics(report, NOW)
    assert ('gpufleet_health_fault_tripped{kind="xid",code="79",pci="0000:19:00",class="RESTART_BM",step="reboot"} 1'
            in text)
    assert 'gpufleet_health_fault_count{kind="xid",code="240",pci="0000:18:00",class="unknown",step="none"} 1' in text
    assert 'gpufleet_health_fault_tripped{kind="xid",code="240",pci="0000:18:00",class="unknown",step="none"} 0' in text
    assert 'gpufleet_health_fault_tripped{kind="gpu_missing",code="",pci="",class="RESTART_VM",step="reboot"} 1' in text


def test_a_healthy_node_has_no_fault(tmp_path, fake_nvidia_smi):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi([gpu(0)]), 1), nccl=False)
    assert report["status"] == "pass" and report["faults"] == []


def test_what_could_not_be_read_is_an_unknown_fault_never_a_tripped_one(tmp_path, fake_nvidia_smi, monkeypatch):
    """An unreadable kernel log, and promised GPUs that nvidia-smi cannot be
    asked about (no driver answered): each a fault of an unknown kind,
    visible in the report, never tripped. Unknown is neither "no fault"
    nor a reason to act."""
    monkeypatch.setattr(health, "read_kernel_log", READ_KERNEL_LOG)
    smi = fake_nvidia_smi(rc=9, message="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    cfg = config(tmp_path, smi, 2, kernel_log=str(tmp_path / "none.log"))
    report = health.run_checks(cfg, nccl=False)
    assert by_check(report)["xid"]["result"] == "unknown"
    found = {f["kind"]: f for f in report["faults"]}
    assert set(found) == {"kernel_log_unreadable", "gpus_unreadable"}
    for fault in found.values():
        assert (fault["class"], fault["step"], fault["tripped"]) == ("unknown", "none", False)
    assert "none.log is not readable" in found["kernel_log_unreadable"]["detail"]
    assert found["gpus_unreadable"]["detail"].startswith("nvidia-smi: no_driver")


def test_promised_gpus_nvidia_smi_does_not_list_are_missing(tmp_path, fake_nvidia_smi):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi([]), 2), nccl=False)
    (fault,) = report["faults"]
    assert (fault["kind"], fault["class"], fault["tripped"]) == ("gpu_missing", "RESTART_VM", True)
    assert "promises 2 GPU(s)" in fault["detail"]


def test_a_bad_fault_policy_is_refused_before_any_check(tmp_path, fake_nvidia_smi):
    cfg = config(tmp_path, fake_nvidia_smi([gpu(0)]), 1, xid_policy={"79": {"class": "REBOOT"}})
    with pytest.raises(ValueError, match="node_health_xid_policy.79.class: 'REBOOT' is not a class"):
        health.run_checks(cfg, nccl=False)


def test_pci_gpus_reads_sysfs(tmp_path, monkeypatch):
    monkeypatch.undo()
    for name, vendor, klass in [("0000:18:00.0", "0x10de", "0x030200"), ("0000:19:00.0", "0x10de", "0x068000"),
                                ("0000:1a:00.0", "0x8086", "0x030000"), ("0000:1b:00.0", "0x10de", "0x030000")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "vendor").write_text(vendor + "\n")
        (tmp_path / name / "class").write_text(klass + "\n")
    # Two NVIDIA GPUs (3D and VGA); the NVSwitch bridge and the Intel GPU do not count.
    assert health.pci_gpus(tmp_path) == 2


# ---- a vGPU share, an unknown count ------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (None, None), ("", None), (0, 0), ("2", 2), (8.0, 8), (0.25, 0.25), ("0.5", 0.5),
])
def test_expected_count_keeps_a_share_and_unknown(value, expected):
    got = health.expected_count(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value", [-1, 1.5, "many"])
def test_expected_count_refuses_what_no_inventory_says(value):
    with pytest.raises(ValueError):
        health.expected_count(value)


def test_a_vgpu_share_expects_one_gpu_device():
    share = health.check_gpu_count(0.25, "ok", "", [gpu()], 1)
    assert share["result"] == "pass" and "vGPU share of 0.25" in share["detail"]
    assert share["data"] == {"expected": 0.25, "found": 1}
    # int(0.25) would have expected no GPU and failed the one it has; a
    # share with no device, or with two, is not what the inventory says.
    assert health.check_gpu_count(0.25, "no_gpu", "nvidia-smi listed no GPU", [], 0)["result"] == "fail"
    assert health.check_gpu_count(0.5, "ok", "", [gpu(0), gpu(1)], 2)["result"] == "fail"


def test_an_unknown_count_is_unknown_neither_pass_nor_fail():
    for gpus in ([], [gpu()], [gpu(0), gpu(1)]):
        r = health.check_gpu_count(None, "ok" if gpus else "no_gpu", "", gpus, len(gpus))
        assert r["result"] == "unknown" and "does not know" in r["detail"]
        assert r["data"] == {"expected": None, "found": len(gpus)}


def test_a_vgpu_node_runs_the_gpu_checks(tmp_path, fake_nvidia_smi):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi([gpu()]), 0.25), nccl=False)
    assert report["status"] == "pass", report
    assert (report["gpus_expected"], report["gpu_devices_expected"], report["gpus_found"]) == (0.25, 1, 1)
    assert by_check(report)["ecc"]["result"] == "pass"


def test_an_unknown_count_with_no_gpu_leaves_the_gpu_checks_unknown(tmp_path, fake_nvidia_smi, capsys):
    cfg = config(tmp_path, fake_nvidia_smi(rc=6, message="No devices were found"), None)
    report = health.run_checks(cfg, nccl=False)
    # Not "pass" (a GPU may be missing) and not "fail" (none was promised).
    assert report["status"] == "unknown"
    checks = by_check(report)
    assert checks["gpu_count"]["result"] == "unknown"
    for name in ("driver_version", "persistence_mode", "ecc", "row_remap", "pcie_link", "nccl_busbw"):
        assert checks[name]["result"] == "unknown" and "does not know" in checks[name]["detail"]
    # The kernel log is read all the same: it would show a lost GPU.
    assert checks["xid"]["result"] == "pass"
    (tmp_path / "health.json").write_text(json.dumps(cfg))
    assert health.main(["--config", str(tmp_path / "health.json")]) == 0
    metrics = (tmp_path / "gpufleet_health.prom").read_text()
    assert "gpufleet_health_gpus_expected NaN" in metrics
    assert 'gpufleet_health_check{check="gpu_count",result="unknown"} 1' in metrics
    assert json.loads((tmp_path / "report.json").read_text())["gpus_expected"] is None


def test_an_unknown_count_with_gpus_checks_them(tmp_path, fake_nvidia_smi):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi([gpu(0), gpu(1)]), None), nccl=False)
    assert report["status"] == "unknown"
    checks = by_check(report)
    assert checks["gpu_count"]["result"] == "unknown"
    assert checks["ecc"]["result"] == "pass" and checks["persistence_mode"]["result"] == "pass"


# ---- NVSwitch (SXid) lines and row remaps ------------------------------------------

SWITCH_LOG = "\n".join([
    kern_log_line(3, "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 34 sourcetrack timeout error (First)"),
    kern_log_line(2, "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error"),
    kern_log_line(2, "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error"),
    # Outside the check's 60 minutes: a fault within its class's window still.
    kern_log_line(90, "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"),
]) + "\n"


def switch_lines(text: str):
    return health.faults.sxid_events(text), "kern.log"


def test_a_fatal_sxid_fails_the_sxid_check_and_non_fatal_ones_are_named():
    r = health.check_sxid(switch_lines(SWITCH_LOG), 60, True, "", NOW)
    assert r["result"] == "fail"
    assert "fatal NVSwitch errors: SXid 24007 on 0000:07:00.0 x1 (kern.log)" in r["detail"]
    assert "non-fatal: SXid 12028 on 0000:05:00.0 x2" in r["detail"] and "20034" not in r["detail"]
    # Non-fatal alone passes, and says what it saw.
    r = health.check_sxid(switch_lines(SWITCH_LOG.split("\n", 1)[1]), 60, True, "", NOW)
    assert r["result"] == "pass" and "non-fatal: SXid 12028" in r["detail"]


def test_an_sxid_of_a_severity_not_read_is_unknown_and_a_log_not_read_is_unknown():
    odd = kern_log_line(1, "nvidia-nvswitch0: SXid (PCI:0000:08:00.0): 20034, Severe, Link 30 LTSSM Fault Up")
    r = health.check_sxid(switch_lines(odd), 60, True, "", NOW)
    assert r["result"] == "unknown" and "SXid 20034 on 0000:08:00.0 x1" in r["detail"]
    assert health.check_sxid((None, "no kernel log is readable here"), 60, True, "", NOW)["result"] == "unknown"
    assert health.check_sxid((None, health.NOT_READ), 60, False, "no GPU on this node", NOW)["result"] == "skip"


def test_sxid_lines_become_faults_and_fail_the_node(tmp_path, fake_nvidia_smi, monkeypatch):
    monkeypatch.setattr(health, "read_kernel_log", READ_KERNEL_LOG)
    (tmp_path / "kern.log").write_text(SWITCH_LOG)
    cfg = config(tmp_path, fake_nvidia_smi([gpu(0)]), 1, kernel_log=str(tmp_path / "kern.log"))
    report = health.run_checks(cfg, nccl=False, now=NOW)
    rows = {(f["kind"], f["code"], f["pci"]): (f["class"], f["count"], f["tripped"]) for f in report["faults"]}
    assert rows == {
        ("sxid_fatal", 24007, "0000:07:00.0"): ("RESTART_VM", 1, True),
        ("sxid_fatal", 20034, "0000:06:00.0"): ("RESTART_VM", 0, False),
        ("sxid_non_fatal", 12028, "0000:05:00.0"): ("IGNORE", 2, True),
    }
    assert report["status"] == "fail" and by_check(report)["xid"]["result"] == "pass"


def test_a_pending_or_failed_row_remap_fails_and_is_a_fault_of_its_gpu(tmp_path, fake_nvidia_smi):
    smi = fake_nvidia_smi([gpu(0, remap_pending="Yes"), gpu(1, remap_failure="Yes"), gpu(2)])
    report = health.run_checks(config(tmp_path, smi, 3), nccl=False, now=NOW)
    remap = by_check(report)["row_remap"]
    assert remap["result"] == "fail"
    assert remap["detail"] == ("row remapping failed on GPU 00000000:19:00.0; "
                               "a row remap waits for a reset of GPU 00000000:18:00.0")
    rows = {(f["kind"], f["pci"]): (f["class"], f["step"], f["tripped"]) for f in report["faults"]}
    assert rows == {("row_remap_pending", "00000000:18:00.0"): ("RESET_GPU", "reset_gpu", True),
                    ("row_remap_failure", "00000000:19:00.0"): ("CONTACT_SUPPORT", "replace", True)}
    healthy = health.run_checks(config(tmp_path, fake_nvidia_smi([gpu(0), gpu(1)]), 2), nccl=False, now=NOW)
    assert by_check(healthy)["row_remap"]["result"] == "pass" and healthy["faults"] == []


NO_REMAP_XML = ("<nvidia_smi_log><gpu id='00000000:18:00.0'><pci><pci_bus_id>00000000:18:00.0</pci_bus_id></pci>"
                "<remapped_rows>N/A</remapped_rows></gpu></nvidia_smi_log>")
HALF_XML = NO_REMAP_XML.replace("<remapped_rows>N/A</remapped_rows>",
                                "<remapped_rows><remapped_row_pending>No</remapped_row_pending></remapped_rows>")


@pytest.mark.parametrize("gpus, smi, result, says", [
    # Before Ampere: nothing to remap.
    (1, {"xml": NO_REMAP_XML}, "skip", "do not remap rows"),
    (1, {"xml_rc": 15}, "unknown", "nvidia-smi -q -x exit 15: query failed"),
    (1, {"xml": "NVIDIA-SMI has failed"}, "unknown", "did not return XML"),
    (1, {"xml": "<nvidia_smi_log/>"}, "unknown", "lists 0 GPU(s) and its query 1"),
    (2, {"xml": NO_REMAP_XML}, "unknown", "lists 1 GPU(s) and its query 2"),
    (1, {"xml": HALF_XML}, "unknown", "reports only one of the pending and failure flags"),
])
def test_row_remaps_that_cannot_be_read_are_unknown_never_pass(tmp_path, fake_nvidia_smi, gpus, smi, result, says):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi([gpu(i) for i in range(gpus)], **smi), gpus),
                               nccl=False, now=NOW)
    remap = by_check(report)["row_remap"]
    assert remap["result"] == result and says in remap["detail"], remap
    unknown = [f for f in report["faults"] if f["kind"] == "row_remap_unreadable"]
    if result == "unknown":
        (fault,) = unknown
        assert (fault["class"], fault["tripped"], fault["detail"]) == ("unknown", False, remap["detail"])
        assert report["status"] == "unknown"
    else:
        assert unknown == [] and report["status"] == "pass"


def test_a_node_without_gpus_does_not_ask_for_row_remaps(tmp_path, fake_nvidia_smi):
    report = health.run_checks(config(tmp_path, fake_nvidia_smi(rc=6, message="No devices were found"), 0),
                               nccl=False, now=NOW)
    assert (by_check(report)["row_remap"]["result"], by_check(report)["sxid"]["result"]) == ("skip", "skip")
    assert report["status"] == "pass" and report["faults"] == []
