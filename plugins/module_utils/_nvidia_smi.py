# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Parse ``nvidia-smi -q -x`` and ``nvidia-smi nvlink -s`` into plain data.

Private to this collection: the shape of what these functions return is the
``gpu`` fact of ``gpufleet.cloud.gpu_facts`` and may change with it.

nvidia-smi's XML changed over driver branches; the parser reads each field
from every place a supported branch puts it:

- power: ``power_readings`` (up to R525) or ``gpu_power_readings`` (R530 on),
  where R550 added ``instant_power_draw``/``average_power_draw`` and later
  branches dropped plain ``power_draw``;
- ECC counters: ``single_bit``/``double_bit`` totals (before Ampere) or the
  ``sram_*``/``dram_*`` counters, whose uncorrectable SRAM count R570 split
  into ``_parity`` and ``_secded``.

Values nvidia-smi cannot report (``N/A``, ``[Not Supported]``, ...) become None.

``query_gpus`` is the one ``--query-gpu`` call the nodes' own scripts make
(the nvidia-smi exporter, node_health, the guard's idle probe): _common's
node_library step installs this file on the node as gpufleet_nvidia_smi.py.
It uses the standard library only.
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

# The same file in both places it runs: in a module, a module_utils of the
# collection; on a node, a file of the node-side library.
try:
    from ansible_collections.gpufleet.cloud.plugins.module_utils import _process
except ImportError:  # pragma: no cover - on a node
    import gpufleet_process as _process  # pylint: disable=import-error

# nvidia-smi's documented exit codes for the states a node can honestly be
# in: no GPU, and no driver (or one it cannot talk to).
EXIT_STATUS = {6: "no_gpu", 9: "no_driver"}

_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)")
_NVLINK_GPU = re.compile(r"^GPU (\d+): .*\(UUID: ([^)]+)\)\s*$")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.+?)\s*$")


class NvidiaSmiParseError(ValueError):
    """The text is not nvidia-smi's XML report."""


def _text(element, path):
    """The stripped text at path, or None when missing or not reported."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    # nvidia-smi writes "N/A", "[N/A]", "[Not Supported]", "Unknown Error",
    # "Requested functionality has been deprecated" and so on where a value
    # does not apply; none of them starts with a digit or is a mode word.
    if not value or value.startswith("[") or value in ("N/A", "Unknown Error", "Not Available") \
            or value.startswith("Requested functionality"):
        return None
    return value


def _number(element, path, kind=float):
    """The leading number of "81559 MiB", "41 C", "16x" or "123.45 W"."""
    value = _text(element, path)
    if value is None:
        return None
    match = _NUMBER.match(value)
    if not match:
        return None
    return kind(float(match.group(1))) if kind is int else kind(match.group(1))


def _first_number(element, paths, kind=float):
    for path in paths:
        value = _number(element, path, kind)
        if value is not None:
            return value
    return None


def _enabled(element, path):
    """Enabled/Disabled as a bool; None where the GPU has no such mode."""
    value = _text(element, path)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "enable", "on", "yes"):
        return True
    if lowered in ("disabled", "disable", "off", "no"):
        return False
    return None


def _ecc_counts(section):
    """Correctable and uncorrectable totals of one ECC section.

    Pre-Ampere GPUs report single_bit/double_bit with a total each; later
    ones report one counter per memory (sram_*, dram_*)."""
    if section is None:
        return {"correctable": None, "uncorrectable": None}
    if section.find("single_bit") is not None or section.find("double_bit") is not None:
        return {
            "correctable": _number(section, "single_bit/total", int),
            "uncorrectable": _number(section, "double_bit/total", int),
        }
    correctable = uncorrectable = None
    for child in section:
        tag = child.tag
        if not tag.startswith(("sram_", "dram_")) or "threshold" in tag:
            continue
        value = _number(section, tag, int)
        if value is None:
            continue
        if "uncorrectable" in tag:
            uncorrectable = (uncorrectable or 0) + value
        elif "correctable" in tag:
            correctable = (correctable or 0) + value
    return {"correctable": correctable, "uncorrectable": uncorrectable}


def _gpu(index, element):
    power_sections = ("gpu_power_readings", "power_readings")
    power_draw = None
    power_limit = None
    for section in power_sections:
        readings = element.find(section)
        if readings is None:
            continue
        power_draw = _first_number(readings, ("power_draw", "instant_power_draw", "average_power_draw"))
        power_limit = _first_number(readings, ("current_power_limit", "enforced_power_limit", "power_limit"))
        break
    link = element.find("pci/pci_gpu_link_info")
    return {
        "index": index,
        "name": _text(element, "product_name"),
        "uuid": _text(element, "uuid"),
        # The same domain:bus:device.function nvidia-smi prints, e.g.
        # 00000000:19:00.0 (a 32-bit domain, unlike sysfs's 0000:19:00.0).
        "pci_bus_id": _text(element, "pci/pci_bus_id") or element.get("id"),
        "memory_total_mib": _number(element, "fb_memory_usage/total", int),
        "ecc_mode": {
            "current": _enabled(element, "ecc_mode/current_ecc"),
            "pending": _enabled(element, "ecc_mode/pending_ecc"),
        },
        "ecc_errors": {
            "volatile": _ecc_counts(element.find("ecc_errors/volatile")),
            "aggregate": _ecc_counts(element.find("ecc_errors/aggregate")),
        },
        "persistence_mode": _enabled(element, "persistence_mode"),
        "mig_mode": {
            "current": _enabled(element, "mig_mode/current_mig"),
            "pending": _enabled(element, "mig_mode/pending_mig"),
        },
        "temperature_c": _number(element, "temperature/gpu_temp", int),
        "power_draw_w": power_draw,
        "power_limit_w": power_limit,
        "pcie": {
            "gen_current": _number(link, "pcie_gen/current_link_gen", int),
            "gen_max": _number(link, "pcie_gen/max_link_gen", int),
            "width_current": _number(link, "link_widths/current_link_width", int),
            "width_max": _number(link, "link_widths/max_link_width", int),
        },
        # NVSwitch systems register each GPU with the fabric manager; older
        # drivers and PCIe cards have no <fabric> element or report N/A.
        "fabric": {
            "state": _text(element, "fabric/state"),
            "status": _text(element, "fabric/status"),
        },
        # Ampere and later remap a degraded memory row at the next GPU reset
        # (pending) and flag a remap that could not be made (failure); older
        # GPUs write <remapped_rows>N/A</remapped_rows>, and every value is None.
        "row_remap": {
            "pending": _enabled(element, "remapped_rows/remapped_row_pending"),
            "failure": _enabled(element, "remapped_rows/remapped_row_failure"),
            "correctable": _number(element, "remapped_rows/remapped_row_corr", int),
            "uncorrectable": _number(element, "remapped_rows/remapped_row_unc", int),
        },
        "nvlinks": [],
    }


def parse_query_xml(text):
    """``nvidia-smi -q -x`` output as a dict: driver and CUDA versions and
    one entry per GPU, indexed in the order nvidia-smi lists them (which is
    nvidia-smi's own index order)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    # The DOCTYPE names an external DTD; ElementTree never fetches it.
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise NvidiaSmiParseError("nvidia-smi -q -x did not return XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError("expected <nvidia_smi_log>, found <%s>" % root.tag)
    gpus = [_gpu(index, element) for index, element in enumerate(root.findall("gpu"))]
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "count": len(gpus),
        "gpus": gpus,
    }


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` as {gpu index: [links]}.

    Each GPU's block is a ``GPU N: NAME (UUID: ...)`` line followed by one
    ``Link L: <speed> GB/s`` or ``Link L: <inactive>`` line per link. GPUs
    without NVLink print the GPU line alone, or nothing at all."""
    links = {}
    current = None
    for line in text.splitlines():
        gpu = _NVLINK_GPU.match(line)
        if gpu:
            current = int(gpu.group(1))
            links[current] = []
            continue
        link = _NVLINK_LINK.match(line)
        if link and current is not None:
            state = link.group(2)
            speed = _NUMBER.match(state)
            links[current].append({
                "link": int(link.group(1)),
                "active": bool(speed),
                "speed_gbps": float(speed.group(1)) if speed else None,
            })
    return links


def merge_nvlinks(facts, links):
    """Attach parsed NVLink states to the GPUs of parse_query_xml's result."""
    for gpu in facts["gpus"]:
        gpu["nvlinks"] = links.get(gpu["index"], [])
    return facts


def tools_problem(gpu):
    """Why the driver's tools cannot vouch for the GPUs on the bus, or ''.

    `gpu` is gpufleet.cloud.gpu_facts' ``gpu`` fact. Every GPU fact comes
    from nvidia-smi: when it is missing, refuses to run (NVML's
    "Driver/library version mismatch" after the libraries were replaced
    without a reboot), or reports a driver other than the loaded module,
    nothing about the GPUs is known. No GPU on the bus: nothing to vouch for."""
    gpu = gpu or {}
    on_bus = len(gpu.get("pci_gpus") or [])
    if on_bus == 0:
        return ""
    if not gpu.get("nvidia_smi"):
        return "nvidia-smi is not installed, so nothing about the %d GPU(s) on the bus is known" % on_bus
    if gpu.get("error"):
        return "%s cannot run: %s" % (gpu["nvidia_smi"], gpu["error"])
    loaded, reported = gpu.get("loaded_module_version"), gpu.get("driver_version")
    if loaded and reported != loaded:
        return ("nvidia-smi reports driver %s while the kernel runs module %s: the libraries and the module "
                "differ" % (reported or "none", loaded))
    return ""


def query_gpus(nvidia_smi, fields, timeout):
    """Ask nvidia-smi for ``fields`` of every GPU (``--query-gpu``, CSV
    without units). Returns (status, detail, rows): status is ok,
    nvidia_smi_missing, no_driver, no_gpu or error; detail says why for all
    but ok; rows is one dict per GPU, field to text as nvidia-smi printed it
    ([N/A] included). A missing, failing or hanging nvidia-smi is a status,
    never an exception and never "no GPU"."""
    done = _process.run([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], timeout)
    if done.failure == _process.MISSING:
        return "nvidia_smi_missing", done.why, []
    if done.failure == _process.TIMEOUT:
        return "error", "nvidia-smi did not answer within %.0fs" % timeout, []
    if done.rc is None:
        return "error", done.why, []
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.rc != 0:
        return (EXIT_STATUS.get(done.rc, "error"), "nvidia-smi exit %d: %s" % (done.rc, said[0] if said else ""), [])
    rows = [dict(zip(fields, (cell.strip() for cell in row))) for row in csv.reader(done.stdout.splitlines()) if row]
    if not rows:
        return "no_gpu", "nvidia-smi listed no GPU", []
    return "ok", "", rows
