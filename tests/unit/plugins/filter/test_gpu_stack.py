"""The GPU stack roles' decisions (plugins/filter/gpu_stack.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cloud.plugins.filter import gpu_stack as f

H100_MODELS = [r"A100-SXM", r"A800-SXM", r"H100 80GB HBM3", r"H100-SXM", r"H200", r"H800"]


@pytest.mark.parametrize(
    "facts, platform",
    [
        ({"distribution": "Debian", "distribution_major_version": "12", "os_family": "Debian"}, "debian12"),
        ({"distribution": "Debian", "distribution_major_version": "13", "os_family": "Debian"}, "debian13"),
        ({"distribution": "Debian", "distribution_major_version": "11", "os_family": "Debian"}, ""),
        ({"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22"}, "ubuntu2204"),
        ({"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24"}, "ubuntu2404"),
        ({"distribution": "Ubuntu", "distribution_version": "23.10", "distribution_major_version": "23"}, ""),
        # Not supported: no RPM repository is reachable to test against, so
        # the GPU roles refuse these in preflight.
        ({"distribution": "Rocky", "distribution_major_version": "9", "os_family": "RedHat"}, ""),
        ({"distribution": "RedHat", "distribution_major_version": "9", "os_family": "RedHat"}, ""),
        ({"distribution": "Fedora", "distribution_major_version": "41", "os_family": "RedHat"}, ""),
    ],
)
def test_platform_names_follow_nvidias_repository_directories(facts, platform):
    assert f.nvidia_platform(facts) == platform


def test_platform_refuses_what_is_not_facts():
    with pytest.raises(AnsibleFilterError, match="expects ansible_facts"):
        f.nvidia_platform("debian12")


@pytest.mark.parametrize(
    "driver, cuda",
    [("535", "12.2"), ("535.309.01", "12.2"), ("550.163.01", "12.4"), ("580", "13.0"), ("470", "11.4"), ("999", "")],
)
def test_cuda_max_by_branch_or_version(driver, cuda):
    assert f.nvidia_cuda_max(driver) == cuda


def test_cuda_max_extra_branches_extend_and_override():
    assert f.nvidia_cuda_max("595.10.01") == ""
    assert f.nvidia_cuda_max("595.10.01", {"595": "13.2"}) == "13.2"
    assert f.nvidia_cuda_max("550", {550: "12.3"}) == "12.3"


@pytest.mark.parametrize(
    "args, needed",
    [
        # NVSwitches on the PCI bus decide, whatever the model says.
        (("auto", 4, "", 0), True),
        # HGX 8-GPU boards without visible switches (passed-through VMs).
        (("auto", 0, "NVIDIA H100 80GB HBM3", 8), True),
        (("auto", 0, "NVIDIA H200", 8), True),
        (("auto", 0, "NVIDIA A100-SXM4-80GB", 8), True),
        (("auto", 0, "NVIDIA H800", 8), True),
        # Fewer than eight SXM GPUs: a slice of the board, no switch to manage.
        (("auto", 0, "NVIDIA H100 80GB HBM3", 4), False),
        # PCIe cards, however many, never have NVSwitches.
        (("auto", 0, "NVIDIA H100 PCIe", 8), False),
        (("auto", 0, "NVIDIA L40S", 8), False),
        (("auto", 0, "", 0), False),
        (("always", 0, "", 0), True),
        (("never", 6, "NVIDIA H100 80GB HBM3", 8), False),
    ],
)
def test_fabricmanager_decision(args, needed):
    mode, switches, model, count = args
    assert f.nvidia_fabricmanager_needed(mode, switches, model, count, H100_MODELS) is needed


def test_fabricmanager_mode_must_be_known():
    with pytest.raises(AnsibleFilterError, match="auto, always or never"):
        f.nvidia_fabricmanager_needed("sometimes")


@pytest.mark.parametrize(
    "loaded, pinned, container, gpus, reboot",
    [
        ("550.163.01", "550.163.01", False, 8, False),  # converged
        ("535.261.03", "535.309.01", False, 8, True),  # upgraded, old module still loaded
        (None, "550.163.01", False, 1, True),  # nouveau held the GPU
        ("535.261.03", "535.309.01", True, 8, False),  # container: the host's kernel
        (None, "550.163.01", False, 0, False),  # no GPU on the bus: nothing to load
    ],
)
def test_reboot_only_when_the_loaded_module_differs(loaded, pinned, container, gpus, reboot):
    assert f.nvidia_reboot_needed(loaded, pinned, container, gpus) is reboot


DKMS_3 = """\
nvidia-current/550.163.01, 6.12.48+deb13-amd64, x86_64: installed
nvidia-current/550.163.01, 6.12.57+deb13-amd64, x86_64: built
"""
DKMS_2 = """\
nvidia-current, 535.309.01, 6.1.0-40-amd64, x86_64: installed
nvidia-current, 535.261.03, 6.1.0-41-amd64, x86_64: installed
"""


def test_dkms_finds_the_kernel_update_whose_build_did_not_install():
    kernels = ["6.12.48+deb13-amd64", "6.12.57+deb13-amd64"]
    assert f.nvidia_dkms_unbuilt(DKMS_3, kernels, "550.163.01") == ["6.12.57+deb13-amd64"]


def test_dkms_a_build_of_another_version_does_not_count():
    kernels = ["6.1.0-40-amd64", "6.1.0-41-amd64"]
    assert f.nvidia_dkms_unbuilt(DKMS_2, kernels, "535.309.01") == ["6.1.0-41-amd64"]


def test_dkms_registered_only_means_every_kernel_is_unbuilt():
    kernels = ["6.1.0-41-amd64", "6.1.0-40-amd64"]
    assert f.nvidia_dkms_unbuilt("nvidia-current/535.309.01: added\n", kernels, "535.309.01") == [
        "6.1.0-40-amd64",
        "6.1.0-41-amd64",
    ]


def test_dkms_other_modules_and_warnings_are_ignored():
    status = (
        "zfs/2.2.4, 6.8.0-40-generic, x86_64: installed\n"
        "nvidia/550.54.15, 6.8.0-40-generic, x86_64: installed (original_module exists)\n"
        "Error! Could not locate dkms.conf file.\n"
    )
    assert f.nvidia_dkms_unbuilt(status, ["6.8.0-40-generic"], "550.54.15") == []
    # A container has no kernel of its own: nothing to build.
    assert f.nvidia_dkms_unbuilt(status, [], "550.54.15") == []


PACKAGES = {
    "nvidia-smi": [{"name": "nvidia-smi", "version": "535.261.03-1"}],
    "libcuda1": [{"name": "libcuda1", "version": "535.309.01-0+deb12u1"}],
}


def test_pin_mismatches_are_installed_packages_at_another_version():
    names = ["nvidia-smi", "libcuda1", "nvidia-kernel-dkms"]
    assert f.nvidia_pin_mismatches(names, "535.309.01*", PACKAGES) == ["nvidia-smi"]
    assert f.nvidia_pin_mismatches(names, "535.261.03*", PACKAGES) == ["libcuda1"]
    # Not installed is not a mismatch: there is no hold to release.
    assert f.nvidia_pin_mismatches(["nvidia-kernel-dkms"], "535.309.01*", PACKAGES) == []


def test_fabric_manager_left_at_another_version_is_replaced():
    # The pain point: nvidia-fabricmanager upgraded (or not) apart from the
    # driver refuses to start ("fabric manager version mismatch"). It is in
    # the driver's pinned set, so its hold is released and it is reinstalled
    # at the driver's version with the rest.
    packages = {
        "cuda-drivers-550": [{"version": "550.163.01-1"}],
        "nvidia-fabricmanager-550": [{"version": "550.90.07-1"}],
    }
    names = ["cuda-drivers-550", "nvidia-fabricmanager-550"]
    assert f.nvidia_pin_mismatches(names, "550.163.01*", packages) == ["nvidia-fabricmanager-550"]


def test_pin_mismatches_match_apts_whole_version():
    # apt's package facts give the Debian version whole, revision included.
    packages = {"libnccl2": [{"name": "libnccl2", "version": "2.27.7-1+cuda13.0"}]}
    assert f.nvidia_pin_mismatches(["libnccl2"], "2.27.7-1+cuda13.0", packages) == []
    assert f.nvidia_pin_mismatches(["libnccl2"], "2.27.7-1+cuda12.9", packages) == ["libnccl2"]


BUSBW = {r"H100.*(HBM3|SXM)": 360, r"H200": 360, r"H100": 40, r"A100-SXM": 180}


@pytest.mark.parametrize(
    "name, threshold",
    [
        ("NVIDIA H100 80GB HBM3", 360.0),
        ("NVIDIA H100 PCIe", 40.0),  # first match wins: the SXM pattern comes first
        ("NVIDIA H200", 360.0),
        ("NVIDIA A100-SXM4-80GB", 180.0),
        ("Tesla T4", 5.0),
        ("", 5.0),
    ],
)
def test_busbw_threshold_per_model_with_a_fallback(name, threshold):
    assert f.nccl_busbw_threshold(name, BUSBW, 5) == threshold


@pytest.mark.parametrize("name, threshold", [
    ("NVIDIA H100 80GB HBM3", 360.0), ("NVIDIA H200", 360.0), ("NVIDIA A100-SXM4-80GB", 180.0),
    ("NVIDIA A800-SXM4-80GB", 120.0), ("NVIDIA L40S", 10.0), ("Tesla T4", 10.0),
    ("NVIDIA B200", 1.0), ("", 1.0),  # a model the table lacks: the fallback
])
def test_without_a_table_the_built_in_one_is_the_one_both_roles_read(name, threshold):
    assert f.nccl_busbw_threshold(name) == f.nccl_busbw_threshold(name, {}) == threshold


def test_the_roles_default_to_the_built_in_table():
    # One home: neither role carries a copy of the table.
    import yaml  # pylint: disable=import-outside-toplevel
    from pathlib import Path  # pylint: disable=import-outside-toplevel
    roles = Path(__file__).resolve().parents[4] / "roles"
    nccl = yaml.safe_load((roles / "nccl" / "defaults" / "main.yml").read_text())
    health = yaml.safe_load((roles / "node_health" / "defaults" / "main.yml").read_text())
    assert nccl["nccl_tests_min_busbw_by_model"] == {} and nccl["nccl_tests_fallback_busbw"] == f.NCCL_FALLBACK_BUSBW
    assert health["node_health_nccl_min_busbw_gbps"].strip().endswith("| gpufleet.cloud.nccl_busbw_threshold }}")


def test_every_filter_is_exported():
    assert set(f.FilterModule().filters()) == {
        "nvidia_platform",
        "nvidia_cuda_max",
        "nvidia_fabricmanager_needed",
        "nvidia_reboot_needed",
        "nvidia_dkms_unbuilt",
        "nvidia_pin_mismatches",
        "cuda_packages",
        "cuda_toolkit_problems",
        "nccl_busbw_threshold",
    }


CUDA_TABLE = {
    "cuda_repo": {"pattern": "cuda-{component}-{major}-{minor}", "library_pattern": "{component}-{major}-{minor}"},
    "distro": {
        "debian13": {"toolkit": ["nvidia-cuda-toolkit"], "cudart": ["libcudart12"], "cublas": ["libcublas12"]},
    },
}


def test_cuda_packages_from_nvidias_repository_are_named_by_version():
    toolkit = {"version": "12.4", "components": ["toolkit", "cudart", "libcublas"]}
    assert f.cuda_packages(toolkit, "cuda_repo", "debian12", ["toolkit"], CUDA_TABLE) == [
        "cuda-toolkit-12-4",
        "cuda-cudart-12-4",
        "libcublas-12-4",
    ]
    # No components: the role's default set.
    assert f.cuda_packages({"version": "13.0"}, "mirror", "ubuntu2404", ["toolkit"], CUDA_TABLE) == ["cuda-toolkit-13-0"]


def test_cuda_packages_from_debian_come_from_the_platform_table():
    toolkit = {"version": "12.4", "components": ["cudart", "cublas"]}
    assert f.cuda_packages(toolkit, "distro", "debian13", [], CUDA_TABLE) == ["libcudart12", "libcublas12"]


@pytest.mark.parametrize(
    "toolkit, platform, message",
    [
        ({"version": "12.4", "components": ["nsight"]}, "debian13", "debian13 has no CUDA components nsight"),
        ({"version": "12.4", "components": ["cudart"]}, "debian12", "debian12 has no CUDA components cudart"),
        ({"version": "12"}, "debian13", "is not X.Y"),
    ],
)
def test_cuda_packages_refuses_what_the_source_does_not_have(toolkit, platform, message):
    with pytest.raises(AnsibleFilterError, match=message):
        f.cuda_packages(toolkit, "distro", platform, ["toolkit"], CUDA_TABLE)


DISTRO = {"cudart": ["libcudart12"], "nvcc": ["nvidia-cuda-toolkit"]}


@pytest.mark.parametrize("toolkits, source, problems", [
    ([{"version": "12.8"}], "cuda_repo", []),
    ([{"version": "12.8"}, {"version": "13.0", "components": ["cudart", ["nvcc"]]}], "mirror", []),
    ([{"version": "12.4"}], "distro", []),
    ([{"components": ["cudart"]}], "cuda_repo", ["an entry has no version"]),
    (["12.8", {"version": "12.8"}], "cuda_repo", ["an entry has no version"]),
    ([{"version": "12"}, {"version": 12.8}], "cuda_repo", ["versions that are not X.Y: ['12']"]),
    ([{"version": "12.8"}, {"version": "12.8"}], "cuda_repo", ["a version given twice"]),
    ([{"version": "12.8", "components": ["Nvcc", "cudart", 7]}], "cuda_repo", ["unknown components ['Nvcc', '7']"]),
    ([{"version": "12.4", "components": ["cufft"]}], "distro", ["unknown components ['cufft']"]),
    ([{"version": "12.8"}], "distro",
     ["Debian 13 ships CUDA 12.4 only, with the components cudart, nvcc"]),
    # Every problem at once, in the order the message gives them.
    ([{"version": "12"}, {"version": "12"}, {"components": ["x y"]}], "cuda_repo",
     ["an entry has no version", "versions that are not X.Y: ['12', '12']", "a version given twice",
      "unknown components ['x y']"]),
])
def test_toolkit_problems_name_each_fault_once(toolkits, source, problems):
    assert f.cuda_toolkit_problems(toolkits, source, "12.4", ["cudart"], DISTRO, "13") == problems


def test_toolkit_components_flatten_as_ansible_does_and_default_per_entry():
    # An entry without components takes the defaults; nulls are dropped as
    # Ansible's flatten drops them, so they are not "unknown".
    assert f.cuda_toolkit_problems([{"version": "12.8", "components": [None, ["cudart"]]}, {"version": "13.0"}],
                                   "cuda_repo", "12.8", ["Bad"], {}) == ["unknown components ['Bad']"]
