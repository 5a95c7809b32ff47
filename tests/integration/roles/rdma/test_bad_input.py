"""Bad inputs to gpufleet.cloud.rdma fail before anything changes.

Each case applies the role to a fresh real node (all cases in one run, see
../bad_input.py): the run fails, the
message names the bad variable, no task changed, and the role's files and
packages are still absent."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

# Files the role manages: none may exist after a failed run.
PATHS = ["/etc/security/limits.d/91-gpufleet-rdma.conf", "/etc/ansible/facts.d/gpufleet_rdma.fact"]

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"rdma_memlock_user": ["trainer"], "gpufleet_strict_inputs": True},
        "rdma_memlock_user",
        "did you mean rdma_memlock_users?",
    ),
    "unknown variant": ({"rdma_variant": "omnipath"}, "rdma_variant"),
    # The inventory's variable feeds rdma_variant, and is checked as that.
    "unknown variant from the inventory": ({"gpufleet_rdma": "iwarp"}, "rdma_variant"),
    "wrong type: list expected": ({"rdma_memlock_users": "trainer"}, "rdma_memlock_users", "expected a list"),
    "wrong type: number for a list": ({"rdma_extra_packages": 5}, "rdma_extra_packages", "expected a list"),
    "unknown choice": ({"rdma_peermem": "sometimes"}, "rdma_peermem"),
    "wrong type: dict expected": ({"rdma_modules_by_variant": ["ib_uverbs"]}, "rdma_modules_by_variant"),
    "modules for an unknown variant": ({"rdma_modules_by_variant": {"iwarp": ["iw_cm"]}}, "rdma_modules_by_variant"),
    "bad module name": ({"rdma_extra_modules": ["ib_uverbs; reboot"]}, "rdma_extra_modules"),
    "bad memlock": ({"rdma_memlock": "lots"}, "rdma_memlock"),
    "bad limits domain": ({"rdma_memlock_users": ["Bad User"]}, "rdma_memlock_users"),
    "bad installer url": ({"rdma_efa_installer_url": "efa-installer.tar.gz"}, "rdma_efa_installer_url"),
    "bad installer checksum": ({"rdma_efa_installer_checksum": "sha256"}, "rdma_efa_installer_checksum"),
    "shell in installer options": ({"rdma_efa_installer_args": ["--minimal; reboot"]}, "rdma_efa_installer_args"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.rdma",
    CASES,
    files=PATHS,
    packages=["rdma-core"],
)
