"""Bad inputs to gpufleet.cloud.nvidia_driver fail before anything changes.

Each case applies the role to a fresh Debian 12 node (all cases in one run,
see ../bad_input.py) and checks that the
run fails, that the message names the bad variable, and that nothing on
the node changed: no task reported a change, and the files and packages
the role manages are still absent."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

H100_BOARD = {"model": "NVIDIA H100 80GB HBM3", "count": 8}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"nvidia_driver_brach": "550", "gpufleet_strict_inputs": True},
        "nvidia_driver_brach",
        "did you mean nvidia_driver_branch?",
    ),
    "string for a list": ({"nvidia_driver_extra_packages": "nvidia-smi"}, "nvidia_driver_extra_packages", "expected a list"),
    "unknown branch": ({"nvidia_driver_branch": "999"}, "nvidia_driver_branch", "not a known driver branch"),
    # Not a number at all: the advice gives one, and never asks to add
    # "latest" to nvidia_driver_branches.
    "a branch that is a word": ({"nvidia_driver_branch": "latest"}, "nvidia_driver_branch",
                                "is not a driver branch: give a branch number, for example 570"),
    "branch Debian does not ship": (
        {"nvidia_driver_source": "distro", "nvidia_driver_branch": "550", "nvidia_driver_version": "550.163.01"},
        "nvidia_driver_branch",
        "ships (it has 535 only)",
    ),
    "version of another branch": (
        {"nvidia_driver_branch": "550", "nvidia_driver_version": "535.309.01"},
        "nvidia_driver_version",
        "is not a full version of branch 550",
    ),
    "other branch without a version": ({"nvidia_driver_branch": "570"}, "nvidia_driver_version", "set nvidia_driver_version too"),
    "unknown choice": ({"nvidia_driver_kernel_modules": "closed"}, "nvidia_driver_kernel_modules", "closed"),
    "wrong type: bool expected": ({"nvidia_driver_hold": "perhaps"}, "nvidia_driver_hold", "perhaps"),
    "wrong type: list expected": ({"nvidia_driver_packages": {"nvidia-smi": 1}}, "nvidia_driver_packages", "list"),
    "bad package name": ({"nvidia_driver_extra_packages": ["nvidia-smi; rm -rf /"]}, "nvidia_driver_extra_packages", "rm -rf"),
    "mirror without a URL": ({"nvidia_driver_source": "mirror"}, "nvidia_driver_mirror_url", "http(s) base URL"),
    # An HGX H100 board needs the fabric manager, which Debian does not package.
    "fabric manager needed from Debian": (
        {"nvidia_driver_source": "distro", "gpufleet_gpu": H100_BOARD},
        "nvidia_driver_fabricmanager",
        "Debian does not package it",
    ),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.nvidia_driver",
    CASES,
    files=["/etc/apt/preferences.d/gpufleet-nvidia_driver", "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"],
    packages=["nvidia-smi", "nvidia-kernel-dkms"],
)
