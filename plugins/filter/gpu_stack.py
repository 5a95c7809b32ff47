# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Decisions of the nvidia_driver, cuda and nccl roles, as filters.

Each decision is a pure function of facts the roles gather, so it is tested
as a unit (tests/unit/plugins/filter/) and stays out of long Jinja
expressions. Documentation for each filter is in the .yml file of its name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# Highest CUDA version each driver branch supports, from NVIDIA's "CUDA
# Toolkit and Corresponding Driver Versions" table. A toolkit newer than its
# driver's entry fails at run time (cudaErrorInsufficientDriver), which is
# why the cuda role checks it in preflight. Newer branches are added by the
# roles' *_branches variables.
DRIVER_BRANCH_MAX_CUDA = {
    "450": "11.0",
    "460": "11.2",
    "470": "11.4",
    "495": "11.5",
    "510": "11.6",
    "515": "11.7",
    "520": "11.8",
    "525": "12.0",
    "530": "12.1",
    "535": "12.2",
    "545": "12.3",
    "550": "12.4",
    "555": "12.5",
    "560": "12.6",
    "565": "12.7",
    "570": "12.8",
    "575": "12.9",
    "580": "13.0",
    "590": "13.1",
}

# dkms 2.x: "nvidia-current, 535.309.01, 6.1.0-18-amd64, x86_64: installed"
# dkms 3.x: "nvidia-current/535.309.01, 6.1.0-18-amd64, x86_64: installed"
# registered but built for no kernel: "nvidia-current/550.163.01: added"
_DKMS_LINE = re.compile(
    r"^(?P<module>[^,/\s]+)[,/]\s*(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+)(?:,\s*[^:]+)?)?:\s*(?P<state>[A-Za-z]+)"
)


def nvidia_platform(facts):
    """NVIDIA's name for the node's OS (its repository directory), or ""."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("nvidia_platform expects ansible_facts, got %s" % type(facts).__name__)
    distribution = str(facts.get("distribution", "")).lower()
    major = str(facts.get("distribution_major_version", ""))
    if distribution == "debian" and major in ("12", "13"):
        return "debian" + major
    if distribution == "ubuntu":
        version = str(facts.get("distribution_version", "")).replace(".", "")
        return "ubuntu" + version if version in ("2204", "2404") else ""
    return ""


def nvidia_cuda_max(driver, extra=None):
    """The highest CUDA X.Y a driver branch (or a full driver version)
    supports; "" for a branch nobody has described."""
    branch = str(driver).split(".", 1)[0].strip()
    table = dict(DRIVER_BRANCH_MAX_CUDA)
    table.update({str(k): str(v) for k, v in (extra or {}).items()})
    return table.get(branch, "")


def nvidia_fabricmanager_needed(mode, nvswitches=0, gpu_model="", gpu_count=0, models=None):
    """Whether the node needs nvidia-fabricmanager.

    NVSwitch systems (HGX/DGX 8-GPU A100, H100, H200, H800 SXM) do not bring
    their NVLink fabric up, and CUDA fails to initialise, until the fabric
    manager has configured the switches. The NVSwitches are visible on the
    PCI bus before any driver exists; where they are not (some cloud VMs
    pass only the GPUs through), eight GPUs of an NVSwitch model decide."""
    if mode in ("always", "never"):
        return mode == "always"
    if mode != "auto":
        raise AnsibleFilterError("nvidia_fabricmanager_needed: mode must be auto, always or never, not %r" % mode)
    if int(nvswitches or 0) > 0:
        return True
    model = str(gpu_model or "")
    return int(gpu_count or 0) >= 8 and any(re.search(pattern, model, re.I) for pattern in (models or []))


def nvidia_reboot_needed(loaded_version, pinned_version, in_container=False, gpus_on_bus=0):
    """Whether only a reboot can bring the pinned driver into the kernel.

    Never in a container (its kernel is the host's) and never on a node with
    no NVIDIA GPU on the bus; otherwise exactly when the loaded module is not
    the pinned version (an older module still loaded after an upgrade, or
    none, because nouveau held the GPU until it was blacklisted)."""
    if in_container or int(gpus_on_bus or 0) == 0:
        return False
    return (loaded_version or "") != str(pinned_version)


def nvidia_dkms_unbuilt(dkms_status, kernels, version, prefix="nvidia"):
    """Installed kernels for which DKMS has not installed the NVIDIA module
    at the pinned version. A kernel update whose DKMS build failed (or never
    ran, for want of headers) boots without a driver; this finds it first."""
    installed = set()
    for line in (dkms_status or "").splitlines():
        match = _DKMS_LINE.match(line.strip())
        if not match or not match.group("module").startswith(prefix):
            continue
        if match.group("version") == str(version) and match.group("state") == "installed" and match.group("kernel"):
            installed.add(match.group("kernel"))
    return sorted(k for k in set(kernels or []) if k not in installed)


def nvidia_pin_mismatches(names, version, packages):
    """Packages among names that are installed at a version other than the
    pin (a glob such as 550.163.01*). Their holds must be released before
    the pinned version can replace them."""
    mismatched = []
    for name in names:
        versions = []
        for entry in (packages or {}).get(name, []):
            versions.append(entry.get("version", ""))
        if versions and not any(fnmatch.fnmatchcase(v, str(version)) for v in versions):
            mismatched.append(name)
    return mismatched


def cuda_packages(toolkit, source, platform, default_components, table):
    """The packages of one CUDA toolkit entry ({version, components}).

    NVIDIA's repository names packages by component and version
    (cuda-nvcc-12-4, libcublas-12-4); Debian has one toolkit per release
    and a fixed list of packages per component."""
    version = str(toolkit.get("version", ""))
    parts = version.split(".")
    if len(parts) < 2:
        raise AnsibleFilterError("cuda_packages: version %r is not X.Y" % version)
    components = toolkit.get("components") or default_components or []
    if source == "distro":
        offered = (table.get("distro") or {}).get(platform) or {}
        unknown = [c for c in components if c not in offered]
        if unknown:
            raise AnsibleFilterError("cuda_packages: %s has no CUDA components %s" % (platform, ", ".join(unknown)))
        return [package for component in components for package in offered[component]]
    repo = table.get("cuda_repo") or {}
    packages = []
    for component in components:
        pattern = repo.get("library_pattern") if component.startswith("lib") else repo.get("pattern")
        packages.append(
            str(pattern).replace("{component}", component).replace("{major}", parts[0]).replace("{minor}", parts[1])
        )
    return packages


_CUDA_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")
_CUDA_COMPONENT = re.compile(r"^[a-z][a-z0-9-]*$")


def _flat(items):
    """Nested lists as one, without nulls, as Ansible's flatten filter gives them."""
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flat(item)
        elif item not in (None, "None", "null"):
            yield item


def cuda_toolkit_problems(toolkits, source, offered, default_components, distro_components, debian_release=""):
    """What is wrong with the cuda role's toolkit entries, one phrase per
    problem, in a fixed order; empty when they can be installed. offered is
    the source's toolkit version for this platform; distro_components the
    components Debian packages (a dict keyed by name)."""
    # An entry that is not a mapping has no version (argument validation
    # refuses it first; the filter must not fail on it either).
    toolkits = [toolkit if isinstance(toolkit, Mapping) else {} for toolkit in toolkits or []]
    offered = str(offered)
    versions = [str(toolkit["version"]) for toolkit in toolkits if "version" in toolkit]
    components = list(_flat(toolkit.get("components", default_components) for toolkit in toolkits))
    if source == "distro":
        unknown = [c for c in components if c not in (distro_components or {})]
    else:
        unknown = [c for c in components if not (isinstance(c, str) and _CUDA_COMPONENT.match(c))]
    not_xy = [v for v in versions if not _CUDA_VERSION.match(v)]
    problems = []
    if len(versions) < len(toolkits):
        problems.append("an entry has no version")
    if not_xy:
        problems.append("versions that are not X.Y: %s" % not_xy)
    if len(set(versions)) != len(versions):
        problems.append("a version given twice")
    if unknown:
        problems.append("unknown components %s" % [str(c) for c in unknown])
    if source == "distro" and versions != [offered]:
        problems.append("Debian %s ships CUDA %s only, with the components %s"
                        % (debian_release, offered, ", ".join(str(c) for c in (distro_components or {}))))
    return problems


# Minimum all_reduce_perf bus bandwidth (GB/s) on one node with all its
# GPUs, first matching model wins: about three quarters of what a healthy
# HGX board reaches. The one table the nccl role's test and node_health's
# NCCL check both read; measure your own fleet and tighten it (the roles
# take a table of their own).
NCCL_MIN_BUSBW_BY_MODEL = {
    "H100 80GB HBM3|H100-SXM|H200": 360,
    "H800": 150,
    "A100-SXM": 180,
    "A800-SXM": 120,
    "H100 NVL|H100 PCIe|A100-PCIE|L40S|L40|L4|A10|T4": 10,
}
# For a model no entry matches.
NCCL_FALLBACK_BUSBW = 1


def nccl_busbw_threshold(gpu_name, table=None, fallback=None):
    """Minimum all_reduce bus bandwidth (GB/s) for a GPU model: the first
    entry of table (pattern: GB/s, in order) whose pattern matches; an
    empty or no table is the built-in one."""
    for pattern, value in (table or NCCL_MIN_BUSBW_BY_MODEL).items():
        if re.search(pattern, str(gpu_name or ""), re.I):
            return float(value)
    return float(NCCL_FALLBACK_BUSBW if fallback is None else fallback)


class FilterModule:
    """The GPU stack roles' decisions."""

    def filters(self):
        return {
            "nvidia_platform": nvidia_platform,
            "nvidia_cuda_max": nvidia_cuda_max,
            "nvidia_fabricmanager_needed": nvidia_fabricmanager_needed,
            "nvidia_reboot_needed": nvidia_reboot_needed,
            "nvidia_dkms_unbuilt": nvidia_dkms_unbuilt,
            "nvidia_pin_mismatches": nvidia_pin_mismatches,
            "cuda_packages": cuda_packages,
            "cuda_toolkit_problems": cuda_toolkit_problems,
            "nccl_busbw_threshold": nccl_busbw_threshold,
        }
