"""The rdma role's default variant, rendered as Ansible renders it, from
what the GPU inventory plugins say (gpufleet_rdma)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[4]
SPEC = yaml.safe_load((ROOT / "roles/rdma/meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]


def variant(**variables):
    default = yaml.safe_load((ROOT / "roles/rdma/defaults/main.yml").read_text())["rdma_variant"]
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(default))


@pytest.mark.parametrize(("inventory", "expected"), [
    ({}, "auto"), ({"gpufleet_rdma": "efa"}, "efa"), ({"gpufleet_rdma": "none"}, "none"),
    # The plugins could not look the instance type up: the devices tell.
    ({"gpufleet_rdma": "unknown"}, "auto"),
])
def test_the_inventorys_rdma_becomes_a_variant_the_role_accepts(inventory, expected):
    assert variant(**inventory) == expected
    assert expected in SPEC["rdma_variant"]["choices"]


def test_the_argument_specs_default_is_the_defaults_file():
    default = yaml.safe_load((ROOT / "roles/rdma/defaults/main.yml").read_text())["rdma_variant"]
    assert SPEC["rdma_variant"]["default"] == default
