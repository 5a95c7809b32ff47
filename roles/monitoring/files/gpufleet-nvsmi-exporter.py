# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""GPU metrics from nvidia-smi for node_exporter's textfile collector.

Installed by gpufleet.cloud.monitoring and run by a systemd timer:

    python3 gpufleet-nvsmi-exporter.py --nvidia-smi /usr/bin/nvidia-smi \
        --output /var/lib/prometheus/node-exporter/gpufleet_gpu.prom

Where nvidia-smi is missing or cannot reach a driver, the file says so
(gpufleet_gpu_exporter_up 0 and the reason) and carries no GPU samples:
never a made-up value. The file is replaced atomically, so node_exporter
never reads half of it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# The node-side library (gpufleet_nvidia_smi.py, gpufleet_textfile.py) is
# installed next to this script by _common's node_library step.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpufleet_nvidia_smi import query_gpus  # noqa: E402  pylint: disable=wrong-import-position
from gpufleet_textfile import gauge, sample_text, write_atomic  # noqa: E402  pylint: disable=wrong-import-position

# nvidia-smi --query-gpu field -> (metric name, help, multiplier to base unit)
FIELDS = {
    "utilization.gpu": ("gpufleet_gpu_utilization_percent", "GPU busy time over the last sample period, percent.", 1),
    "utilization.memory": ("gpufleet_gpu_memory_utilization_percent", "Memory controller busy time, percent.", 1),
    "memory.used": ("gpufleet_gpu_memory_used_bytes", "Framebuffer memory in use, bytes.", 1024 * 1024),
    "memory.total": ("gpufleet_gpu_memory_total_bytes", "Framebuffer memory, bytes.", 1024 * 1024),
    "temperature.gpu": ("gpufleet_gpu_temperature_celsius", "GPU core temperature, degrees Celsius.", 1),
    "power.draw": ("gpufleet_gpu_power_watts", "Power draw, watts.", 1),
    "ecc.errors.uncorrected.volatile.total": (
        "gpufleet_gpu_ecc_uncorrected_volatile_total",
        "Uncorrectable ECC errors since the driver loaded.",
        1,
    ),
    "ecc.errors.corrected.volatile.total": (
        "gpufleet_gpu_ecc_corrected_volatile_total",
        "Correctable ECC errors since the driver loaded.",
        1,
    ),
}
LABEL_FIELDS = ["index", "uuid", "name", "driver_version", "pci.bus_id"]


def query(nvidia_smi: str, timeout: float = 30.0) -> tuple[str, str, list[dict[str, str]]]:
    """Ask nvidia-smi for every field: (status, detail, rows), as
    gpufleet_nvidia_smi.query_gpus gives them."""
    return query_gpus(nvidia_smi, LABEL_FIELDS + list(FIELDS), timeout)


def number(text: str) -> float | None:
    """A numeric nvidia-smi value, or None for [N/A], [Not Supported] and the like."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def render(status: str, detail: str, rows: list[dict[str, str]], now: float) -> str:
    lines = [
        *gauge("gpufleet_gpu_exporter_up", "1 when nvidia-smi answered with GPU data, else 0.",
               [({}, status == "ok")]),
        *gauge("gpufleet_gpu_exporter_status",
               "Why the exporter has or lacks data (ok, nvidia_smi_missing, no_driver, no_gpu, error).",
               [({"status": status, "detail": detail}, 1)]),
        *gauge("gpufleet_gpu_count", "GPUs nvidia-smi reports; 0 when it reports none or cannot run.",
               [({}, len(rows))]),
        *gauge("gpufleet_gpu_exporter_last_run_timestamp_seconds", "When the exporter last ran.",
               [({}, f"{now:.3f}")]),
    ]
    if rows:
        lines += gauge("gpufleet_gpu_info", "Identity of each GPU; always 1.", [
            ({"gpu": row["index"], "uuid": row["uuid"], "model": row["name"], "driver_version": row["driver_version"],
              "pci_bus_id": row["pci.bus_id"]}, 1) for row in rows])
    for field, (metric, help_text, scale) in FIELDS.items():
        samples = [(row["index"], number(row.get(field, ""))) for row in rows]
        samples = [({"gpu": gpu}, sample_text(value * scale)) for gpu, value in samples if value is not None]
        if samples:
            lines += gauge(metric, help_text, samples)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nvidia-smi", default="/usr/bin/nvidia-smi")
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    status, detail, rows = query(args.nvidia_smi)
    write_atomic(args.output, render(status, detail, rows, time.time()))
    # A node without a GPU is a state the metrics describe, not a failure of
    # this exporter: only an unexpected nvidia-smi error fails the unit.
    return 1 if status == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
