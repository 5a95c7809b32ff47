#!/usr/bin/python
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Modules carry the GPLv3+ header that ansible-test's validate-modules
# requires; the rest of the collection is Apache-2.0 (see galaxy.yml).

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: NVIDIA GPU facts from nvidia-smi and sysfs
version_added: 0.1.0
description:
  - Runs C(nvidia-smi -q -x) and C(nvidia-smi nvlink -s) and returns the
    driver and CUDA versions and, per GPU, its index, name, UUID, PCI bus,
    total memory, ECC mode and error counts, persistence mode, MIG mode,
    temperature, power, PCIe link and NVLink state, as the C(gpu) fact.
  - Also reads, without the driver, the version of the loaded C(nvidia)
    kernel module and the NVIDIA GPUs and NVSwitches on the PCI bus, which
    the driver role needs before the driver exists.
  - A node without nvidia-smi, without a loaded driver or without GPUs gets
    an empty GPU list, not a failure; O(ignore_errors=false) turns an
    nvidia-smi that fails into a failure instead.
author: gpufleet developers (@gpufleet)
options:
  nvidia_smi_path:
    description:
      - Path to nvidia-smi. By default the first C(nvidia-smi) on the
        module's search path.
    type: path
  ignore_errors:
    description:
      - When V(true), an nvidia-smi that exits non-zero (no driver loaded,
        no GPU) gives an empty GPU list and its message in RV(ansible_facts.gpu.error).
      - When V(false), such a run fails the task. Use it where GPUs must be present.
    type: bool
    default: true
  timeout:
    description: Seconds each nvidia-smi call may take; a GPU in a bad state can hang it.
    type: int
    default: 60
  require_tools:
    description:
      - When V(true), the node's NVIDIA GPUs on the PCI bus must be visible
        to a working nvidia-smi that reports the loaded module's driver
        version. Where they are not (nvidia-smi missing, failing, or NVML's
        C(Driver/library version mismatch)), check mode reports a change,
        which a drift scan reports as drifted, and a normal run fails with
        the reason.
      - A node with no NVIDIA GPU on the bus always passes.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: partial
    description: Changes nothing; with O(require_tools), a problem comes with a diff that names it.
  facts:
    support: full
    description: Returns the C(gpu) fact.
notes:
  - Indexes are nvidia-smi's own, so C(CUDA_VISIBLE_DEVICES) with
    C(CUDA_DEVICE_ORDER=PCI_BUS_ID) names the same GPUs.
"""

EXAMPLES = r"""
- name: Read GPU facts
  gpufleet.cloud.gpu_facts:

- name: Every GPU must have ECC on and no uncorrectable errors
  ansible.builtin.assert:
    that:
      - item.ecc_mode.current
      - (item.ecc_errors.volatile.uncorrectable | default(0, true)) == 0
  loop: "{{ ansible_facts.gpu.gpus }}"
  loop_control:
    label: "{{ item.index }} {{ item.name }}"

- name: Fail when a GPU node has no working driver
  gpufleet.cloud.gpu_facts:
    ignore_errors: false
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu:
      description: What the node's NVIDIA GPUs and driver report.
      returned: always
      type: dict
      contains:
        nvidia_smi:
          description: Path of the nvidia-smi that ran, or null when there is none.
          type: str
          sample: /usr/bin/nvidia-smi
        error:
          description: Why nvidia-smi gave no GPUs (its own message), or null.
          type: str
          sample: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        driver_version:
          description: Driver version nvidia-smi reports, or null.
          type: str
          sample: 550.163.01
        cuda_version:
          description: Highest CUDA version the driver supports, or null.
          type: str
          sample: "12.4"
        loaded_module_version:
          description: Version of the loaded C(nvidia) kernel module from sysfs, or null when none is loaded.
          type: str
          sample: 550.163.01
        count:
          description: Number of GPUs nvidia-smi reports.
          type: int
          sample: 8
        gpus:
          description: One entry per GPU, in nvidia-smi's index order.
          type: list
          elements: dict
          sample:
            - index: 0
              name: NVIDIA H100 80GB HBM3
              uuid: GPU-2f6e1d0c-8b1a-4c1e-9d7a-0c4f5e6a7b8c
              pci_bus_id: "00000000:19:00.0"
              memory_total_mib: 81559
              ecc_mode: {current: true, pending: true}
              ecc_errors:
                volatile: {correctable: 0, uncorrectable: 0}
                aggregate: {correctable: 3, uncorrectable: 0}
              persistence_mode: true
              mig_mode: {current: false, pending: false}
              temperature_c: 33
              power_draw_w: 71.52
              power_limit_w: 700.0
              pcie: {gen_current: 5, gen_max: 5, width_current: 16, width_max: 16}
              fabric: {state: Completed, status: Success}
              # null each on GPUs without row remapping (before Ampere)
              row_remap: {pending: false, failure: false, correctable: 0, uncorrectable: 0}
              nvlinks:
                - {link: 0, active: true, speed_gbps: 26.562}
        pci_gpus:
          description: PCI addresses of NVIDIA display and 3D controllers, read from sysfs without the driver.
          type: list
          elements: str
          sample: ["0000:19:00.0"]
        pci_nvswitches:
          description: PCI addresses of NVIDIA NVSwitches (PCI bridges), read from sysfs without the driver.
          type: list
          elements: str
          sample: ["0000:05:00.0"]
        driver_gpus:
          description:
            - PCI addresses of the GPUs the loaded NVIDIA driver runs, one per entry of
              C(/proc/driver/nvidia/gpus); empty without a loaded driver.
            - In a container C(/proc/driver) is the host's, so pair it with RV(ansible_facts.gpu.control_device).
          type: list
          elements: str
          sample: ["0000:19:00.0"]
        control_device:
          description:
            - Whether C(/dev/nvidiactl) exists. The driver creates it on a machine; a container
              has it only when it was given GPUs.
          type: bool
          sample: true
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.cloud.plugins.module_utils._nvidia_smi import (
    NvidiaSmiParseError,
    merge_nvlinks,
    parse_nvlink_status,
    parse_query_xml,
    tools_problem,
)

NVIDIA_VENDOR = "0x10de"
# PCI class codes (class, subclass): display/VGA, display/3D, bridge/other.
# NVSwitches enumerate as "bridge, other" devices of NVIDIA's vendor ID.
GPU_CLASSES = ("0x0300", "0x0302")
NVSWITCH_CLASS = "0x0680"


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def loaded_module_version(sys_root="/sys"):
    """The version of the loaded nvidia module, or None when none is loaded."""
    return _read(os.path.join(sys_root, "module", "nvidia", "version")) or None


def pci_devices(sys_root="/sys"):
    """NVIDIA GPUs and NVSwitches on the PCI bus: (gpus, nvswitches)."""
    base = os.path.join(sys_root, "bus", "pci", "devices")
    gpus, switches = [], []
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        return gpus, switches
    for address in addresses:
        if _read(os.path.join(base, address, "vendor")) != NVIDIA_VENDOR:
            continue
        pci_class = (_read(os.path.join(base, address, "class")) or "")[:6]
        if pci_class in GPU_CLASSES:
            gpus.append(address)
        elif pci_class == NVSWITCH_CLASS:
            switches.append(address)
    return gpus, switches


def driver_gpus(proc_root="/proc"):
    """PCI addresses of the GPUs the loaded driver runs: one directory each
    under /proc/driver/nvidia/gpus (none without a driver)."""
    try:
        return sorted(os.listdir(os.path.join(proc_root, "driver", "nvidia", "gpus")))
    except OSError:
        return []


def empty_facts(nvidia_smi=None, error=None):
    return {
        "nvidia_smi": nvidia_smi,
        "error": error,
        "driver_version": None,
        "cuda_version": None,
        "count": 0,
        "gpus": [],
    }


def run_smi(module, path, *args):
    """nvidia-smi under coreutils' timeout: a GPU that fell off the bus can
    hang it, and facts gathering must not hang the play with it."""
    argv = [path] + list(args)
    timeout_bin = module.get_bin_path("timeout")
    if timeout_bin:
        argv = [timeout_bin, str(module.params["timeout"])] + argv
    return module.run_command(argv)


def gather(module):
    path = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not path or not os.access(path, os.X_OK):
        return empty_facts()
    rc, out, err = run_smi(module, path, "-q", "-x")
    if rc != 0:
        # Exit 9: no driver loaded; 6: no GPU found; 124: timed out.
        message = (out.strip() or err.strip() or "nvidia-smi exited %d" % rc).splitlines()[0]
        if not module.params["ignore_errors"]:
            module.fail_json(msg="nvidia-smi -q -x failed (exit %d): %s" % (rc, message), rc=rc)
        return empty_facts(path, message)
    try:
        facts = parse_query_xml(out)
    except NvidiaSmiParseError as exc:
        module.fail_json(msg=str(exc))
    facts["nvidia_smi"] = path
    facts["error"] = None
    if facts["count"]:
        rc, out, err = run_smi(module, path, "nvlink", "-s")
        # GPUs without NVLink make some branches exit non-zero here; that
        # means "no links", not a broken node.
        if rc == 0:
            merge_nvlinks(facts, parse_nvlink_status(out))
    return facts


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi_path": {"type": "path"},
            "ignore_errors": {"type": "bool", "default": True},
            "timeout": {"type": "int", "default": 60},
            "require_tools": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    facts = gather(module)
    facts["loaded_module_version"] = loaded_module_version()
    facts["pci_gpus"], facts["pci_nvswitches"] = pci_devices()
    facts["driver_gpus"] = driver_gpus()
    facts["control_device"] = os.path.exists("/dev/nvidiactl")
    problem = tools_problem(facts) if module.params["require_tools"] else ""
    if problem and not module.check_mode:
        module.fail_json(msg="%s. Reboot to load the installed driver, or reinstall the driver packages so their "
                             "libraries match the loaded module (gpufleet.cloud.nvidia_driver does both)" % problem,
                         ansible_facts={"gpu": facts})
    if problem:
        # Unknown GPUs are never "in sync": a drift scan reports this change.
        module.exit_json(changed=True, msg=problem, ansible_facts={"gpu": facts},
                         diff={"before": problem + "\n", "after": "nvidia-smi reports every GPU on the bus\n"})
    module.exit_json(changed=False, ansible_facts={"gpu": facts})


if __name__ == "__main__":
    main()
