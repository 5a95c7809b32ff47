"""gpufleet.cloud.gpu_facts end to end, with nvidia-smi and sysfs faked:
real fixture output for nvidia-smi, a temporary tree for /sys."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.module_utils._nvidia_smi import tools_problem
from ansible_collections.gpufleet.cloud.plugins.modules import gpu_facts

NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


class FakeNode:
    """What the module sees: which binaries exist and what nvidia-smi says."""

    def __init__(self, monkeypatch, tmp_path, *, smi=True, query=(0, "", ""), nvlink=(0, "", "")):
        self.calls = []
        self.smi = tmp_path / "nvidia-smi"
        if smi:
            self.smi.write_text("#!/bin/sh\n")
            self.smi.chmod(0o755)
        bins = {"nvidia-smi": str(self.smi) if smi else None, "timeout": "/usr/bin/timeout"}
        answers = {"-q": query, "nvlink": nvlink}

        def get_bin_path(_module, name, *args, **kwargs):
            return bins.get(name)

        def run_command(_module, argv, *args, **kwargs):
            self.calls.append(argv)
            return answers[argv[3]]

        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        self.sys = tmp_path / "sys"
        self.sys.mkdir()
        real_loaded, real_pci = gpu_facts.loaded_module_version, gpu_facts.pci_devices
        monkeypatch.setattr(gpu_facts, "loaded_module_version", lambda: real_loaded(str(self.sys)))
        monkeypatch.setattr(gpu_facts, "pci_devices", lambda: real_pci(str(self.sys)))
        self.proc = tmp_path / "proc"
        real_driver_gpus = gpu_facts.driver_gpus
        monkeypatch.setattr(gpu_facts, "driver_gpus", lambda: real_driver_gpus(str(self.proc)))

    def driver_runs(self, *addresses):
        for address in addresses:
            (self.proc / "driver" / "nvidia" / "gpus" / address).mkdir(parents=True)

    def pci(self, address, vendor, pci_class):
        device = self.sys / "bus" / "pci" / "devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(pci_class + "\n")

    def load_module(self, version):
        module = self.sys / "module" / "nvidia"
        module.mkdir(parents=True)
        (module / "version").write_text(version + "\n")


def run(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        gpu_facts.main()
    result = json.loads(capsys.readouterr().out)
    return exc.value.code, result


def test_no_nvidia_smi_gives_an_empty_list(monkeypatch, tmp_path, capsys):
    node = FakeNode(monkeypatch, tmp_path, smi=False)
    code, result = run(capsys)
    assert code == 0 and result["changed"] is False
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["gpus"] == [] and gpu["count"] == 0
    assert gpu["nvidia_smi"] is None and gpu["error"] is None
    assert gpu["loaded_module_version"] is None
    assert node.calls == []


def test_no_driver_gives_an_empty_list_with_the_reason(monkeypatch, tmp_path, capsys):
    FakeNode(monkeypatch, tmp_path, query=(9, NO_DRIVER, ""))
    code, result = run(capsys)
    gpu = result["ansible_facts"]["gpu"]
    assert code == 0
    assert gpu["gpus"] == []
    assert gpu["error"].startswith("NVIDIA-SMI has failed because it couldn't communicate")


def test_no_driver_fails_when_errors_are_not_ignored(monkeypatch, tmp_path, capsys):
    FakeNode(monkeypatch, tmp_path, query=(9, NO_DRIVER, ""))
    code, result = run(capsys, ignore_errors=False)
    assert code == 1 and result["failed"] is True
    assert "exit 9" in result["msg"] and "couldn't communicate" in result["msg"]


def test_gpus_with_nvlinks_under_a_timeout(monkeypatch, tmp_path, capsys, fixture_text):
    node = FakeNode(
        monkeypatch,
        tmp_path,
        query=(0, fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"), ""),
        nvlink=(0, fixture_text("nvidia_smi", "nvlink_h100_x2.txt"), ""),
    )
    node.load_module("550.163.01")
    code, result = run(capsys, timeout=15)
    gpu = result["ansible_facts"]["gpu"]
    assert code == 0
    assert gpu["driver_version"] == "550.163.01" and gpu["loaded_module_version"] == "550.163.01"
    assert [g["uuid"] for g in gpu["gpus"]] == [
        "GPU-6a1c0f6e-3d2b-4c55-9e0f-1b2a3c4d5e60",
        "GPU-0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70",
    ]
    assert len(gpu["gpus"][1]["nvlinks"]) == 18
    assert node.calls == [
        ["/usr/bin/timeout", "15", str(node.smi), "-q", "-x"],
        ["/usr/bin/timeout", "15", str(node.smi), "nvlink", "-s"],
    ]


def test_a_failing_nvlink_query_leaves_links_empty(monkeypatch, tmp_path, capsys, fixture_text):
    FakeNode(monkeypatch, tmp_path, query=(0, fixture_text("nvidia_smi", "a100_mig_r535.xml"), ""), nvlink=(3, "", "x"))
    code, result = run(capsys)
    assert code == 0
    assert result["ansible_facts"]["gpu"]["gpus"][0]["nvlinks"] == []


def test_xml_that_is_not_nvidia_smi_fails(monkeypatch, tmp_path, capsys):
    FakeNode(monkeypatch, tmp_path, query=(0, "<html/>", ""))
    code, result = run(capsys)
    assert code == 1 and "expected <nvidia_smi_log>" in result["msg"]


def test_check_mode_reports_the_same_facts(monkeypatch, tmp_path, capsys, fixture_text):
    FakeNode(monkeypatch, tmp_path, query=(0, fixture_text("nvidia_smi", "tesla_t4_r470.xml"), ""))
    code, normal = run(capsys)
    assert code == 0
    code, checked = run(capsys, _ansible_check_mode=True)
    assert checked["changed"] is False
    assert checked["ansible_facts"] == normal["ansible_facts"]
    assert checked["ansible_facts"]["gpu"]["count"] == 1


def test_pci_scan_finds_gpus_and_nvswitches_without_a_driver(monkeypatch, tmp_path, capsys):
    node = FakeNode(monkeypatch, tmp_path, smi=False)
    node.pci("0000:19:00.0", "0x10de", "0x030200")  # H100 SXM: 3D controller
    node.pci("0000:05:00.0", "0x10de", "0x068000")  # NVSwitch: bridge, other
    node.pci("0000:01:00.0", "0x10de", "0x030000")  # VGA controller
    node.pci("0000:01:00.1", "0x10de", "0x040300")  # the GPU's audio function
    node.pci("0000:00:1f.0", "0x8086", "0x068000")  # someone else's bridge
    code, result = run(capsys)
    assert code == 0
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["pci_gpus"] == ["0000:01:00.0", "0000:19:00.0"]
    assert gpu["pci_nvswitches"] == ["0000:05:00.0"]


def test_the_gpus_the_driver_runs_come_from_proc(monkeypatch, tmp_path, capsys):
    node = FakeNode(monkeypatch, tmp_path, smi=False)
    code, result = run(capsys)
    assert code == 0 and result["ansible_facts"]["gpu"]["driver_gpus"] == []
    node.driver_runs("0000:b3:00.0", "0000:19:00.0")
    code, result = run(capsys)
    assert code == 0
    assert result["ansible_facts"]["gpu"]["driver_gpus"] == ["0000:19:00.0", "0000:b3:00.0"]
    # No driver here: /dev/nvidiactl cannot exist on the test machine.
    assert result["ansible_facts"]["gpu"]["control_device"] is False


# nvidia-smi after the driver's libraries were upgraded under a loaded
# module, as NVML prints it (exit 18).
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.163\n"


@pytest.mark.parametrize("smi, query, loaded, problem", [
    (False, (0, "", ""), None, "nvidia-smi is not installed, so nothing about the 1 GPU(s) on the bus is known"),
    (True, (18, MISMATCH, ""), "535.216.01", "cannot run: Failed to initialize NVML: Driver/library version mismatch"),
    (True, (9, NO_DRIVER, ""), None, "cannot run: NVIDIA-SMI has failed because it couldn't communicate"),
    (True, "h100", "535.216.01", "nvidia-smi reports driver 550.163.01 while the kernel runs module 535.216.01"),
    (True, "h100", "550.163.01", ""),
], ids=["no nvidia-smi", "library mismatch", "no driver", "other module loaded", "in sync"])
def test_the_facts_say_when_the_driver_tools_cannot_vouch_for_the_gpus(monkeypatch, tmp_path, capsys, fixture_text,
                                                                       smi, query, loaded, problem):
    # The rule behind require_tools (which gpufleet.cloud.nvidia_driver
    # uses), on the module's own facts: an unknown GPU is never "in sync".
    if query == "h100":
        query = (0, fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"), "")
    node = FakeNode(monkeypatch, tmp_path, smi=smi, query=query)
    node.pci("0000:19:00.0", "0x10de", "0x030200")
    if loaded:
        node.load_module(loaded)
    _code, result = run(capsys)
    gpu = result["ansible_facts"]["gpu"]
    found = tools_problem(gpu)
    assert (found == "") if problem == "" else (problem in found), found


def test_a_node_without_gpus_needs_no_driver_tools(monkeypatch, tmp_path, capsys):
    FakeNode(monkeypatch, tmp_path, smi=False)
    _code, result = run(capsys)
    assert tools_problem(result["ansible_facts"]["gpu"]) == ""


@pytest.mark.parametrize("check", [True, False], ids=["check mode", "run"])
def test_required_tools_that_cannot_vouch_are_drift_in_check_mode_and_fail_a_run(
        monkeypatch, tmp_path, capsys, check):
    node = FakeNode(monkeypatch, tmp_path, query=(18, MISMATCH, ""))
    node.pci("0000:19:00.0", "0x10de", "0x030200")
    node.load_module("535.216.01")
    code, result = run(capsys, require_tools=True, _ansible_check_mode=check, _ansible_diff=True)
    assert "Driver/library version mismatch" in result["msg"]
    if check:
        assert code == 0 and result["changed"] is True, "an unknown GPU is never in sync"
        assert "version mismatch" in result["diff"]["before"]
    else:
        assert code == 1 and result["failed"] is True and "Reboot to load the installed driver" in result["msg"]


def test_required_tools_that_work_change_nothing(monkeypatch, tmp_path, capsys, fixture_text):
    node = FakeNode(monkeypatch, tmp_path, query=(0, fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"), ""))
    node.pci("0000:19:00.0", "0x10de", "0x030200")
    node.load_module("550.163.01")
    code, result = run(capsys, require_tools=True)
    assert code == 0 and result["changed"] is False
