"""Bad inputs to gpufleet.cloud.cuda fail before anything changes (see
tests/integration/roles/bad_input.py for what is checked)."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"cuda_component": ["nvcc"], "gpufleet_strict_inputs": True},
        "cuda_component",
        "did you mean cuda_components?",
    ),
    "string for a list": ({"cuda_components": "nvcc"}, "cuda_components", "expected a list"),
    "CUDA newer than the driver supports": (
        {"cuda_toolkits": [{"version": "12.8"}], "cuda_driver_version": "535.309.01"},
        "cuda_toolkits",
        "CUDA 12.8 needs a newer driver than 535.309.01, which supports CUDA 12.2 at most",
    ),
    "driver of an unknown branch": (
        {"cuda_driver_version": "999.10.01"},
        "cuda_driver_branches",
        "cuda_driver_version: 999.10.01 is of a branch this role does not know",
    ),
    "toolkit Debian does not ship": (
        {"cuda_source": "distro", "cuda_toolkits": [{"version": "12.4", "components": ["cudart"]}]},
        "cuda_toolkits",
        "ships CUDA 11.8 only",
    ),
    "component Debian does not have": (
        {"cuda_source": "distro", "cuda_components": ["nsight"]},
        "cuda_toolkits",
        "unknown components ['nsight']",
    ),
    "version that is not X.Y": ({"cuda_toolkits": [{"version": "12"}]}, "cuda_toolkits", "versions that are not X.Y: ['12']"),
    "default that is not installed": (
        {"cuda_toolkits": [{"version": "12.4"}], "cuda_default_version": "12.8"},
        "cuda_default_version",
        "is not one of the toolkits",
    ),
    "unknown choice": ({"cuda_source": "conda"}, "cuda_source", "conda"),
    "wrong type: dict elements expected": ({"cuda_toolkits": ["12.4"]}, "cuda_toolkits", "dict"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.cuda",
    CASES,
    files=["/etc/apt/preferences.d/gpufleet-cuda", "/etc/profile.d/gpufleet-cuda.sh", "/usr/local/cuda"],
    packages=["libcudart11.0"],
)
