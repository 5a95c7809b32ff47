"""The nvidia-smi parser on XML in the shapes that driver branches 470 to
575 really write (see the header of _nvidia_smi.py for what differs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _nvidia_smi as nvsmi
from ansible_collections.gpufleet.cloud.plugins.module_utils._nvidia_smi import (
    NvidiaSmiParseError,
    merge_nvlinks,
    parse_nvlink_status,
    parse_query_xml,
)

# Real logs that tools/gpu-probe --fixture-name captured_... copied from a
# machine; none is checked in yet, and then this parametrisation is empty.
CAPTURED = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi").glob("captured_*.xml"))


def test_h100_sxm_r550_versions_and_identity(fixture_text):
    facts = parse_query_xml(fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"))
    assert facts["driver_version"] == "550.163.01"
    assert facts["cuda_version"] == "12.4"
    assert facts["count"] == 2
    first, second = facts["gpus"]
    assert [first["index"], second["index"]] == [0, 1]
    assert first["name"] == "NVIDIA H100 80GB HBM3"
    assert first["uuid"] == "GPU-6a1c0f6e-3d2b-4c55-9e0f-1b2a3c4d5e60"
    assert first["pci_bus_id"] == "00000000:19:00.0"
    assert second["pci_bus_id"] == "00000000:3B:00.0"
    assert first["memory_total_mib"] == 81559


def test_h100_sxm_r550_modes_health_and_links(fixture_text):
    first, second = parse_query_xml(fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"))["gpus"]
    assert first["ecc_mode"] == {"current": True, "pending": True}
    # volatile: dram_correctable 2; aggregate: sram 5 + dram 2 correctable
    assert first["ecc_errors"]["volatile"] == {"correctable": 2, "uncorrectable": 0}
    assert first["ecc_errors"]["aggregate"] == {"correctable": 7, "uncorrectable": 0}
    assert second["ecc_errors"]["aggregate"] == {"correctable": 0, "uncorrectable": 1}
    assert first["persistence_mode"] is True
    assert first["mig_mode"] == {"current": False, "pending": False}
    assert first["temperature_c"] == 33
    assert first["power_draw_w"] == pytest.approx(71.52)
    assert first["power_limit_w"] == pytest.approx(700.0)
    assert first["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert first["fabric"] == {"state": "Completed", "status": "Success"}
    assert first["row_remap"] == {"pending": False, "failure": False, "correctable": 0, "uncorrectable": 0}


def test_a_pending_or_failed_row_remap_is_read_per_gpu(fixture_text):
    text = fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml")
    # The second GPU's block: a remap waiting for the next reset, and one that failed.
    head, tail = text.rsplit("<remapped_rows>", 1)
    tail = (tail.replace("<remapped_row_unc>0<", "<remapped_row_unc>3<", 1)
            .replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<", 1)
            .replace("<remapped_row_failure>No<", "<remapped_row_failure>Yes<", 1))
    first, second = parse_query_xml(head + "<remapped_rows>" + tail)["gpus"]
    assert first["row_remap"]["pending"] is False and first["row_remap"]["failure"] is False
    assert second["row_remap"] == {"pending": True, "failure": True, "correctable": 0, "uncorrectable": 3}


def test_a100_with_mig_enabled_is_not_confused_by_mig_devices(fixture_text):
    facts = parse_query_xml(fixture_text("nvidia_smi", "a100_mig_r535.xml"))
    (gpu,) = facts["gpus"]
    assert facts["driver_version"] == "535.183.01" and facts["cuda_version"] == "12.2"
    assert gpu["mig_mode"] == {"current": True, "pending": True}
    # The MIG instance's own fb_memory_usage (40192 MiB) is not the GPU's.
    assert gpu["memory_total_mib"] == 81920
    assert gpu["pcie"]["gen_max"] == 4
    # Without NVSwitch registration the fabric reads N/A: None, not "N/A".
    assert gpu["fabric"] == {"state": None, "status": None}
    assert gpu["row_remap"] == {"pending": False, "failure": False, "correctable": 0, "uncorrectable": 0}


def test_r575_power_without_power_draw_and_split_sram_counters(fixture_text):
    (gpu,) = parse_query_xml(fixture_text("nvidia_smi", "h100_pcie_r575.xml"))["gpus"]
    # R575 writes instant_power_draw and average_power_draw only.
    assert gpu["power_draw_w"] == pytest.approx(48.33)
    assert gpu["power_limit_w"] == pytest.approx(350.0)
    # sram_uncorrectable_parity (2) + sram_uncorrectable_secded (0) + dram (0)
    assert gpu["ecc_errors"]["aggregate"] == {"correctable": 5, "uncorrectable": 2}
    assert gpu["ecc_errors"]["volatile"] == {"correctable": 1, "uncorrectable": 0}
    assert gpu["persistence_mode"] is False
    # A link trained down to gen 1 is what node health checks look for.
    assert gpu["pcie"] == {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16}


def test_r470_tesla_t4_single_and_double_bit_counters(fixture_text):
    facts = parse_query_xml(fixture_text("nvidia_smi", "tesla_t4_r470.xml"))
    (gpu,) = facts["gpus"]
    assert facts["driver_version"] == "470.239.06" and facts["cuda_version"] == "11.4"
    assert gpu["name"] == "Tesla T4"
    assert gpu["ecc_mode"] == {"current": True, "pending": False}
    assert gpu["ecc_errors"]["volatile"] == {"correctable": 3, "uncorrectable": 0}
    assert gpu["ecc_errors"]["aggregate"] == {"correctable": 17, "uncorrectable": 1}
    # Turing has no MIG: N/A becomes None.
    assert gpu["mig_mode"] == {"current": None, "pending": None}
    assert gpu["power_draw_w"] == pytest.approx(9.64)
    assert gpu["power_limit_w"] == pytest.approx(70.0)
    assert gpu["pcie"] == {"gen_current": 1, "gen_max": 3, "width_current": 8, "width_max": 16}
    # Turing does not remap rows: <remapped_rows>N/A</remapped_rows>.
    assert gpu["row_remap"] == {"pending": None, "failure": None, "correctable": None, "uncorrectable": None}
    assert gpu["fabric"] == {"state": None, "status": None}


def test_a_log_with_no_gpu_is_an_empty_list():
    facts = parse_query_xml(
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>550.163.01</driver_version>'
        "<cuda_version>12.4</cuda_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    assert facts == {"driver_version": "550.163.01", "cuda_version": "12.4", "count": 0, "gpus": []}


@pytest.mark.parametrize(
    "text, message",
    [
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "did not return XML"),
        ("<?xml version='1.0'?><nvsmi><gpu/></nvsmi>", "expected <nvidia_smi_log>"),
    ],
)
def test_anything_else_is_a_parse_error(text, message):
    with pytest.raises(NvidiaSmiParseError, match=message):
        parse_query_xml(text)


def test_nvlink_status_active_and_inactive_links(fixture_text):
    links = parse_nvlink_status(fixture_text("nvidia_smi", "nvlink_h100_x2.txt"))
    assert sorted(links) == [0, 1]
    assert len(links[0]) == 18 and all(link["active"] for link in links[0])
    assert links[0][0] == {"link": 0, "active": True, "speed_gbps": pytest.approx(26.562)}
    assert links[1][7] == {"link": 7, "active": False, "speed_gbps": None}
    assert sum(link["active"] for link in links[1]) == 17


def test_nvlink_status_of_gpus_without_nvlink():
    assert parse_nvlink_status("") == {}
    assert parse_nvlink_status("GPU 0: NVIDIA L4 (UUID: GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0)\n") == {0: []}


def test_merge_nvlinks_gives_every_gpu_a_list(fixture_text):
    facts = parse_query_xml(fixture_text("nvidia_smi", "h100_sxm_x2_r550.xml"))
    merge_nvlinks(facts, {1: [{"link": 0, "active": True, "speed_gbps": 26.562}]})
    assert facts["gpus"][0]["nvlinks"] == []
    assert facts["gpus"][1]["nvlinks"][0]["link"] == 0


@pytest.mark.parametrize("path", CAPTURED, ids=[path.name for path in CAPTURED])
def test_a_captured_log_names_identifies_and_sizes_every_gpu(path):
    """Whatever the GPU and driver branch of a capture: no GPU lost, each
    with its identity, and modes as booleans or None, never nvidia-smi's words."""
    text = path.read_text(encoding="utf-8")
    facts = parse_query_xml(text)
    assert facts["driver_version"] and facts["cuda_version"]
    assert facts["count"] == text.count("<gpu id=") >= 1
    for index, gpu in enumerate(facts["gpus"]):
        assert gpu["index"] == index and gpu["name"]
        assert gpu["uuid"].startswith("GPU-")
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", gpu["pci_bus_id"], re.IGNORECASE)
        assert gpu["memory_total_mib"] > 0
        for mode in (gpu["ecc_mode"]["current"], gpu["persistence_mode"], gpu["mig_mode"]["current"]):
            assert mode in (True, False, None)


def _fake_nvidia_smi(tmp_path, script):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_query_gpus_reads_one_row_per_gpu_by_field(tmp_path):
    fake = _fake_nvidia_smi(tmp_path, 'echo "0, NVIDIA H100 80GB HBM3, 97"\necho "1, NVIDIA H100 80GB HBM3, [N/A]"\n')
    status, detail, rows = nvsmi.query_gpus(fake, ["index", "name", "utilization.gpu"], 5)
    assert (status, detail) == ("ok", "")
    assert rows == [{"index": "0", "name": "NVIDIA H100 80GB HBM3", "utilization.gpu": "97"},
                    {"index": "1", "name": "NVIDIA H100 80GB HBM3", "utilization.gpu": "[N/A]"}]


@pytest.mark.parametrize("script, status, detail", [
    ("echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9\n", "no_driver",
     "nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    ("echo 'No devices were found'; exit 6\n", "no_gpu", "nvidia-smi exit 6: No devices were found"),
    ("echo 'GPU is lost' >&2; exit 15\n", "error", "nvidia-smi exit 15: GPU is lost"),
    ("exit 0\n", "no_gpu", "nvidia-smi listed no GPU"),
    ("sleep 5\n", "error", "nvidia-smi did not answer within 1s"),
])
def test_query_gpus_says_why_it_has_no_rows_and_never_raises(tmp_path, script, status, detail):
    assert nvsmi.query_gpus(_fake_nvidia_smi(tmp_path, script), ["index"], 1) == (status, detail, [])


def test_query_gpus_names_a_missing_or_unrunnable_nvidia_smi(tmp_path):
    missing = str(tmp_path / "absent" / "nvidia-smi")
    assert nvsmi.query_gpus(missing, ["index"], 1) == ("nvidia_smi_missing", f"{missing} not found", [])
    (tmp_path / "noexec").write_text("#!/bin/sh\n")
    status, detail, rows = nvsmi.query_gpus(str(tmp_path / "noexec"), ["index"], 1)
    assert (status, rows) == ("error", []) and "could not run" in detail
