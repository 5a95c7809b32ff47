"""aws_ec2 against the EC2 emulator (moto behind the fault proxy) when the
instance-type lookup fails: no instance is ever lost, and a type whose data
cannot be found gives the built-in catalogue's GPU data where it lists the
type, else GPU data that says "unknown", never "none"."""

from __future__ import annotations

import pytest

from tests.unit.plugins.conftest import plugin_config

REGION = "us-east-1"
SEED = [
    {"region": REGION, "instance_type": "p5.48xlarge", "name": "h100"},
    {"region": REGION, "instance_type": "g5.2xlarge", "name": "a10g"},
    {"region": REGION, "instance_type": "p3dn.24xlarge", "name": "v100"},
    {"region": REGION, "instance_type": "m5.large", "name": "cpu"},
    # Graviton with a T4G: a GPU type the catalogue does not list.
    {"region": REGION, "instance_type": "g5g.xlarge", "name": "t4g"},
    {"region": "eu-west-1", "instance_type": "g4dn.xlarge", "name": "t4"},
]


@pytest.fixture
def aws(start_emulator):
    emulator = start_emulator("aws")
    emulator.seed(SEED)
    return emulator


def listed(inventory, group="all"):
    return sorted(h.get_vars()["gpufleet_name"] for h in inventory.groups[group].get_hosts()) \
        if group in inventory.groups else []


def gpu(inventory, name):
    host = next(h for h in inventory.groups["all"].get_hosts() if h.get_vars()["gpufleet_name"] == name)
    variables = host.get_vars()
    return variables["gpufleet_gpu"], variables["gpufleet_gpu_source"]


def test_one_type_the_region_does_not_offer_loses_no_instance(aws, run_inventory, warnings):
    # The measured failure: EC2 refused the whole DescribeInstanceTypes
    # batch for one type, and the region (then every region) listed nothing.
    aws.faults.unoffered_types[REGION] = {"p3dn.24xlarge", "g5g.xlarge"}
    inventory = run_inventory(plugin_config("aws", aws, hostnames=["instance_id"]))
    assert listed(inventory) == ["a10g", "h100", "t4", "t4g", "v100"]
    assert gpu(inventory, "h100") == ({"model": "H100", "count": 8, "memory_mib": 81920}, "api")
    # The catalogue lists p3dn.24xlarge; nothing lists g5g.xlarge.
    assert gpu(inventory, "v100") == ({"model": "V100", "count": 8, "memory_mib": 32768}, "catalogue")
    assert gpu(inventory, "t4g") == ({"model": None, "count": None, "memory_mib": None}, "unknown")
    assert listed(inventory, "gpu_unknown") == ["t4g"]
    assert listed(inventory, "gpu_v100") == ["v100"]
    # The warnings name the types, and the instances kept with the
    # catalogue's data or with unknown data.
    text = "\n".join(warnings)
    assert "p3dn.24xlarge" in text and "InvalidInstanceType" in text and "gpu_unknown" in text
    assert any("catalogue" in w and "p3dn.24xlarge" in w for w in warnings)
    assert not any("failed:" in w and "region us-east-1 failed" in w for w in warnings)


def test_gpu_unknown_false_leaves_them_out_naming_each(aws, run_inventory, warnings):
    aws.faults.unoffered_types[REGION] = {"p3dn.24xlarge", "g5g.xlarge"}
    inventory = run_inventory(plugin_config("aws", aws, hostnames=["instance_id"], gpu_unknown=False))
    # The catalogue's are known: only the unlisted type's instance goes.
    assert listed(inventory) == ["a10g", "h100", "t4", "v100"]
    left_out = [w for w in warnings if "is left out: its GPU data is unknown" in w]
    assert len(left_out) == 1 and REGION in left_out[0]


def test_gpu_only_false_lists_cpu_instances_as_no_gpu_and_unknown_as_unknown(aws, run_inventory, warnings):
    aws.faults.unoffered_types[REGION] = {"p3dn.24xlarge", "m5.large"}
    inventory = run_inventory(plugin_config("aws", aws, hostnames=["instance_id"], gpu_only=False))
    assert listed(inventory) == ["a10g", "cpu", "h100", "t4", "t4g", "v100"]
    assert listed(inventory, "gpu_unknown") == ["cpu"]


def test_a_type_lookup_throttled_past_its_retries_keeps_the_region(aws, run_inventory, warnings):
    aws.faults.throttle(50, region=REGION, action="DescribeInstanceTypes")
    calls = len(aws.calls)
    inventory = run_inventory(plugin_config("aws", aws, hostnames=["instance_id"], retries=1))
    # Every instance of the region is kept, the CPU one too: with its type
    # unknown, nothing says it has no GPU. The catalogue lists the others'.
    assert listed(inventory) == ["a10g", "cpu", "h100", "t4", "t4g", "v100"]
    assert listed(inventory, "gpu_unknown") == ["cpu", "t4g"]
    assert gpu(inventory, "a10g") == ({"model": "A10G", "count": 1, "memory_mib": 22888}, "catalogue")
    # Not split into smaller lookups: a throttled API is asked no more
    # than the retries allow (two attempts of one batch).
    lookups = [c for c in aws.calls[calls:] if c == {"action": "DescribeInstanceTypes", "region": REGION}]
    assert len(lookups) == 2
    assert any("RequestLimitExceeded" in w for w in warnings)
