"""The nvidia-smi textfile exporter the monitoring role installs."""

from __future__ import annotations

import os

import pytest

from tests.unit.roles.conftest import load_script

exporter = load_script("roles/monitoring/files/gpufleet-nvsmi-exporter.py")

H100 = {
    "index": 0,
    "uuid": "GPU-3b1c",
    "name": "NVIDIA H100 80GB HBM3",
    "driver_version": "550.127.05",
    "pci.bus_id": "00000000:18:00.0",
    "utilization.gpu": 97,
    "utilization.memory": 41,
    "memory.used": 81000,
    "memory.total": 81559,
    "temperature.gpu": 71,
    "power.draw": "689.51",
    "ecc.errors.uncorrected.volatile.total": 0,
    "ecc.errors.corrected.volatile.total": 3,
}


def test_two_gpus_become_samples_in_base_units(fake_nvidia_smi):
    second = dict(H100, index=1, uuid="GPU-77aa", **{"power.draw": "[N/A]", "temperature.gpu": 35})
    status, detail, rows = exporter.query(fake_nvidia_smi([H100, second]))
    assert (status, detail, len(rows)) == ("ok", "", 2)
    text = exporter.render(status, detail, rows, now=1700000000.0)
    assert "gpufleet_gpu_exporter_up 1" in text
    assert "gpufleet_gpu_count 2" in text
    assert 'gpufleet_gpu_utilization_percent{gpu="0"} 97' in text
    assert f'gpufleet_gpu_memory_used_bytes{{gpu="0"}} {81000 * 1024 * 1024}' in text
    assert 'gpufleet_gpu_temperature_celsius{gpu="1"} 35' in text
    assert 'gpufleet_gpu_power_watts{gpu="0"} 689.51' in text
    # [N/A] is left out, never written as a number.
    assert 'gpufleet_gpu_power_watts{gpu="1"}' not in text
    assert 'model="NVIDIA H100 80GB HBM3"' in text and 'driver_version="550.127.05"' in text
    assert "gpufleet_gpu_exporter_last_run_timestamp_seconds 1700000000.000" in text


@pytest.mark.parametrize(
    ("rc", "message", "status"),
    [
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "no_driver"),
        (6, "No devices were found", "no_gpu"),
        (15, "GPU is lost", "error"),
    ],
)
def test_no_readings_when_nvidia_smi_cannot_report(fake_nvidia_smi, rc, message, status):
    got_status, detail, rows = exporter.query(fake_nvidia_smi(rc=rc, message=message))
    assert (got_status, rows) == (status, [])
    assert detail.startswith(f"nvidia-smi exit {rc}: ")
    text = exporter.render(got_status, detail, rows, now=1.0)
    assert "gpufleet_gpu_exporter_up 0" in text
    assert f'gpufleet_gpu_exporter_status{{status="{status}"' in text
    assert "gpufleet_gpu_count 0" in text
    assert "gpufleet_gpu_utilization_percent" not in text
    assert "gpufleet_gpu_info" not in text


def test_missing_nvidia_smi(tmp_path):
    status, detail, rows = exporter.query(str(tmp_path / "nvidia-smi"))
    assert (status, rows) == ("nvidia_smi_missing", [])
    assert "not found" in detail


def test_label_values_are_escaped():
    text = exporter.render("error", 'a"b\\c\nd', [], 0.0)
    assert 'gpufleet_gpu_exporter_status{status="error",detail="a\\"b\\\\c\\nd"} 1' in text.splitlines()


def test_main_writes_the_file_atomically(fake_nvidia_smi, tmp_path):
    out = tmp_path / "gpufleet_gpu.prom"
    assert exporter.main(["--nvidia-smi", fake_nvidia_smi([H100]), "--output", str(out)]) == 0
    assert out.read_text().startswith("# HELP gpufleet_gpu_exporter_up")
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    # No temporary file is left behind.
    assert set(os.listdir(tmp_path)) == {"gpufleet_gpu.prom", "nvidia-smi"}


def test_main_fails_only_on_an_unexpected_error(fake_nvidia_smi, tmp_path):
    out = tmp_path / "gpufleet_gpu.prom"
    assert exporter.main(["--nvidia-smi", fake_nvidia_smi(rc=9, message="no driver"), "--output", str(out)]) == 0
    assert exporter.main(["--nvidia-smi", fake_nvidia_smi(rc=15, message="GPU is lost"), "--output", str(out)]) == 1
    assert 'status="error"' in out.read_text()
