"""gpufleet.cloud.gpu_facts end to end, with nvidia-smi and sysfs faked:
real fixture output for nvidia-smi, a temporary tree for /sys."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

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
