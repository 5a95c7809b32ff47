"""On the same moto dataset, gpufleet.cloud.aws_ec2 lists the same hosts
with the same instance data as amazon.aws.aws_ec2, and adds the GPU data
amazon.aws.aws_ec2 does not have."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.emulators.aws import AwsEmulator
from tests.integration.helpers import ansible_env
from tests.integration.inventory.cli import ansible_inventory, plain

pytestmark = pytest.mark.inventory

REGIONS = ["us-east-1", "eu-west-1"]
# What DescribeInstanceTypes reports for these types (moto carries AWS's own
# data; A10G memory is the usable 22888 MiB, not 24 GiB): model, count,
# memory of one GPU in MiB.
GPUS = {
    "g4dn.xlarge": ("T4", 1, 16384),
    "g5.2xlarge": ("A10G", 1, 22888),
    "p4d.24xlarge": ("A100", 8, 40960),
    "p5.48xlarge": ("H100", 8, 81920),
}


@pytest.fixture(scope="module")
def moto():
    emulator = AwsEmulator(regions=REGIONS).start()
    seed = []
    for index, itype in enumerate(["m5.large", *GPUS] * 3):
        seed.append({
            "region": REGIONS[index % 2],
            "instance_type": itype,
            "name": "node-%02d" % index,
            "state": ("running", "running", "stopped", "terminated")[index % 4],
            "charge": "spot" if index % 3 == 0 else "on_demand",
            "tags": {"team": ("ml", "infra")[index % 2]},
        })
    emulator.seed(seed)
    yield emulator
    emulator.stop()


def listing(env, tmp_path, name, config):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "fleet.aws_ec2.yml").write_text(yaml.safe_dump(config))
    run = ansible_inventory(env, "-i", str(folder / "fleet.aws_ec2.yml"), "--list")
    assert run.returncode == 0, run.stderr
    return plain(json.loads(run.stdout)["_meta"]["hostvars"])


def test_hosts_and_instance_data_agree_and_gpus_are_added(moto, tmp_path):
    env = ansible_env()
    env.update({"AWS_ACCESS_KEY_ID": "AKIA-test", "AWS_SECRET_ACCESS_KEY": "test-secret",
                "AWS_EC2_METADATA_DISABLED": "true"})
    theirs = listing(env, tmp_path, "amazon", {
        "plugin": "amazon.aws.aws_ec2", "regions": REGIONS, "endpoint_url": moto.url, "hostnames": ["instance-id"]})
    ours = listing(env, tmp_path, "gpufleet", {
        "plugin": "gpufleet.cloud.aws_ec2", "regions": REGIONS, "endpoint": moto.url, "hostnames": ["instance_id"],
        "gpu_only": False})

    # Both leave terminated instances out by default.
    assert sorted(ours) == sorted(theirs)
    existing = [i for region in moto.instances.values() for i in region if i["state"] != "terminated"]
    assert sorted(ours) == sorted(i["instance_id"] for i in existing) and len(existing) == 12
    for host, mine in ours.items():
        their = theirs[host]
        assert mine["gpufleet_private_ip"] == their["private_ip_address"]
        assert mine["gpufleet_public_ip"] == their.get("public_ip_address")
        assert mine["gpufleet_instance_type"] == their["instance_type"]
        assert mine["gpufleet_zone"] == their["placement"]["availability_zone"]
        assert mine["gpufleet_region"] == their["placement"]["region"]
        assert mine["gpufleet_state"] == their["state"]["name"]
        assert mine["gpufleet_tags"] == their["tags"]
        assert mine["gpufleet_name"] == their["tags"]["Name"]
        assert mine["gpufleet_spot"] is (their.get("instance_lifecycle") == "spot")
        # The GPU data is ours alone.
        assert not any("gpu" in key.lower() for key in their)
        expected = GPUS.get(mine["gpufleet_instance_type"])
        if expected:
            assert (mine["gpufleet_gpu"]["model"], mine["gpufleet_gpu"]["count"],
                    mine["gpufleet_gpu"]["memory_mib"]) == expected
            assert mine["gpufleet_rdma"] == ("efa" if expected[0] in ("A100", "H100") else "none")
        else:
            assert mine["gpufleet_gpu"]["count"] == 0
