"""Bad inputs to gpufleet.cloud.nccl fail before anything changes (see
tests/integration/roles/bad_input.py for what is checked). The node is
Debian 12, which has no NCCL in its archive: asking for it is bad input
too."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"nccl_versoin": "2.21.5", "gpufleet_strict_inputs": True},
        "nccl_versoin",
        "did you mean nccl_version?",
    ),
    "string for a list": ({"nccl_packages": "libnccl2"}, "nccl_packages", "expected a list"),
    "Debian 12 has no NCCL": ({"nccl_source": "distro"}, "nccl_source", "Debian 12 has no libnccl2"),
    "NCCL built for another CUDA": (
        {"nccl_version": "2.27.7-1+cuda13.0", "nccl_cuda_version": "12.4"},
        "nccl_version",
        "is built for CUDA 13.0, not for CUDA 12.4",
    ),
    # cuda_pinned is what the cuda role publishes when it runs earlier in
    # the play; here it stands for a play whose default toolkit is 12.4.
    "NCCL for a CUDA the cuda role did not pin": (
        {"nccl_cuda_version": "13.0", "cuda_pinned": {"default": "12.4"}},
        "nccl_cuda_version",
        "does not match the default toolkit, CUDA 12.4",
    ),
    "version that is not NCCL's": ({"nccl_version": "2.22"}, "nccl_version", "is not an NCCL version"),
    "conf key that is not NCCL's": ({"nccl_conf": {"DEBUG": "INFO"}}, "nccl_conf", "['DEBUG']"),
    "conf value over two lines": ({"nccl_conf": {"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"}}, "nccl_conf", "['NCCL_DEBUG']"),
    "unknown choice": ({"nccl_tests": "sometimes"}, "nccl_tests", "sometimes"),
    "wrong type: dict expected": ({"nccl_conf": ["NCCL_DEBUG=INFO"]}, "nccl_conf", "dict"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.nccl",
    CASES,
    files=["/etc/apt/preferences.d/gpufleet-nccl", "/etc/nccl.conf", "/etc/gpufleet/nccl.env"],
    packages=["libnccl2"],
)
