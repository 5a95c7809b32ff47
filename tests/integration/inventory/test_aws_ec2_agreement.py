"""On the same moto dataset, gpufleet.cloud.aws_ec2 lists the same hosts
with the same instance data as amazon.aws.aws_ec2, and adds the GPU data
amazon.aws.aws_ec2 does not have.

Two datasets: a small one of GPU and CPU types in two regions, and a mixed
fleet in four regions: stopped, spot and untagged instances of NVIDIA GPU
types, of AWS's own accelerators (Trainium, Inferentia: accelerators, no
GPU) and of CPU-only types. gpu_only (the default) keeps the NVIDIA GPU
types alone; amazon.aws.aws_ec2, which knows nothing of GPUs, is given the
equivalent instance-type filter to be compared with it."""

from __future__ import annotations

import json

import pytest
import yaml
from moto.ec2.models.instance_types import INSTANCE_TYPES

from tests.emulators.aws import AwsEmulator
from tests.integration.inventory.cli import ansible_inventory, plain
from tests.support.nodes import ansible_env

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
    return plain(inventory(env, folder, config)["_meta"]["hostvars"])


def inventory(env, folder, config):
    """ansible-inventory --list of ``config``, written into ``folder``."""
    (folder / "fleet.aws_ec2.yml").write_text(yaml.safe_dump(config))
    run = ansible_inventory(env, "-i", str(folder / "fleet.aws_ec2.yml"), "--list")
    assert run.returncode == 0, run.stderr
    return plain(json.loads(run.stdout))


def aws_env():
    env = ansible_env()
    env.update({"AWS_ACCESS_KEY_ID": "AKIA-test", "AWS_SECRET_ACCESS_KEY": "test-secret",
                "AWS_EC2_METADATA_DISABLED": "true"})
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        env.pop(name, None)
    return env


def test_hosts_and_instance_data_agree_and_gpus_are_added(moto, tmp_path):
    env = aws_env()
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


# -- the mixed fleet ------------------------------------------------------
MIXED_REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"]
NVIDIA_TYPES = ["g4dn.xlarge", "g5.2xlarge", "g5g.xlarge", "g6e.xlarge", "p4d.24xlarge", "p5.48xlarge"]
# Trainium and Inferentia: DescribeInstanceTypes gives them NeuronInfo (and
# Inferentia InferenceAcceleratorInfo), never GpuInfo.
ACCELERATOR_TYPES = ["trn1.2xlarge", "inf2.xlarge", "inf1.xlarge"]
CPU_TYPES = ["m5.large", "c5.large", "t3.micro"]
# (state, charge, tagged): each type gets each of the four, one per region.
VARIANTS = [("running", "on_demand", True), ("stopped", "on_demand", True), ("running", "spot", False),
            ("stopped", "spot", True)]


def test_the_mixed_fleet_types_are_what_moto_reports():
    """The premise of the mixed fleet, checked against moto's own data, so
    that a moto release that changes it fails here and not obscurely."""
    for itype in NVIDIA_TYPES:
        gpus = INSTANCE_TYPES[itype]["GpuInfo"]["Gpus"]
        assert {g["Manufacturer"] for g in gpus} == {"NVIDIA"}, itype
    for itype in ACCELERATOR_TYPES:
        assert "GpuInfo" not in INSTANCE_TYPES[itype] and "NeuronInfo" in INSTANCE_TYPES[itype], itype
    for itype in CPU_TYPES:
        assert not {"GpuInfo", "NeuronInfo", "InferenceAcceleratorInfo"} & set(INSTANCE_TYPES[itype]), itype


@pytest.fixture(scope="module")
def mixed():
    emulator = AwsEmulator(regions=MIXED_REGIONS).start()
    seed = []
    for type_index, itype in enumerate(NVIDIA_TYPES + ACCELERATOR_TYPES + CPU_TYPES):
        for region_index, region in enumerate(MIXED_REGIONS):
            state, charge, tagged = VARIANTS[(type_index + region_index) % len(VARIANTS)]
            seed.append({
                "region": region,
                "instance_type": itype,
                # Untagged: no Name either.
                "name": "mixed-%s-%s" % (itype, region) if tagged else None,
                "state": state,
                "charge": charge,
                "tags": {"team": ("ml", "infra")[type_index % 2]} if tagged else {},
            })
    # One terminated instance per region: both plugins leave them out.
    seed.extend({"region": region, "instance_type": "g5.2xlarge", "name": "gone-" + region, "state": "terminated"}
                for region in MIXED_REGIONS)
    emulator.seed(seed)
    yield emulator
    emulator.stop()


def existing(emulator, types=None):
    return {i["instance_id"]: i for region in emulator.instances.values() for i in region
            if i["state"] != "terminated" and (types is None or i["instance_type"] in types)}


def amazon_config(emulator, **options):
    return {"plugin": "amazon.aws.aws_ec2", "regions": MIXED_REGIONS, "endpoint_url": emulator.url,
            "hostnames": ["instance-id"], **options}


def gpufleet_config(emulator, **options):
    return {"plugin": "gpufleet.cloud.aws_ec2", "regions": MIXED_REGIONS, "endpoint": emulator.url,
            "hostnames": ["instance_id"], **options}


def members(data, group):
    return set((data.get(group) or {}).get("hosts") or ())


def test_the_mixed_fleet_agrees_host_for_host_with_gpu_only_false(mixed, tmp_path):
    env = aws_env()
    (tmp_path / "amazon").mkdir()
    (tmp_path / "gpufleet").mkdir()
    theirs_data = inventory(env, tmp_path / "amazon", amazon_config(mixed))
    ours_data = inventory(env, tmp_path / "gpufleet", gpufleet_config(mixed, gpu_only=False))
    theirs, ours = theirs_data["_meta"]["hostvars"], ours_data["_meta"]["hostvars"]

    seeded = existing(mixed)
    assert len(seeded) == 4 * len(NVIDIA_TYPES + ACCELERATOR_TYPES + CPU_TYPES)
    assert set(ours) == set(theirs) == set(seeded)
    assert {h["gpufleet_region"] for h in ours.values()} == set(MIXED_REGIONS)
    for host, mine in ours.items():
        their, source = theirs[host], seeded[host]
        assert mine["gpufleet_private_ip"] == their["private_ip_address"]
        assert mine["gpufleet_public_ip"] == their.get("public_ip_address")
        assert mine["gpufleet_spot"] is (their.get("instance_lifecycle") == "spot") is (source["charge"] == "spot")
        assert mine["gpufleet_state"] == their["state"]["name"] == source["state"]
        assert mine["gpufleet_instance_type"] == their["instance_type"] == source["instance_type"]
        assert mine["gpufleet_tags"] == their["tags"] == ({**source["tags"], "Name": source["name"]}
                                                          if source["name"] else {})
        assert mine["gpufleet_name"] == source["name"]
    assert members(ours_data, "spot") == {h for h, v in theirs.items() if v.get("instance_lifecycle") == "spot"}
    assert members(ours_data, "spot")

    # Accelerators that are not GPUs, and CPU types: no GPU, known as such
    # from the API (not unknown), in no gpu_ group.
    gpu_groups = {g for g in ours_data if g.startswith("gpu_") and g != "gpu_unknown"}
    in_gpu_groups = set().union(*(members(ours_data, g) for g in gpu_groups))
    for host, mine in ours.items():
        itype = mine["gpufleet_instance_type"]
        if itype in NVIDIA_TYPES:
            gpus = INSTANCE_TYPES[itype]["GpuInfo"]["Gpus"]
            # Model names are kept in upper case (T4g is T4G).
            assert (mine["gpufleet_gpu"]["model"], mine["gpufleet_gpu"]["count"]) == (
                gpus[0]["Name"].upper(), sum(g["Count"] for g in gpus)), host
            assert host in in_gpu_groups
        else:
            assert (mine["gpufleet_gpu"]["model"], mine["gpufleet_gpu"]["count"]) == (None, 0), (itype, mine)
            assert mine["gpufleet_gpu_source"] == "api"
            assert host not in in_gpu_groups
    assert not members(ours_data, "gpu_unknown")


def test_the_mixed_fleet_with_gpu_only_agrees_with_an_instance_type_filter(mixed, tmp_path):
    env = aws_env()
    (tmp_path / "amazon").mkdir()
    (tmp_path / "gpufleet").mkdir()
    # gpu_only's equivalent for a plugin without GPU data: the NVIDIA GPU
    # types by name, as moto's DescribeInstanceTypes gives them GpuInfo.
    theirs = inventory(env, tmp_path / "amazon", amazon_config(
        mixed, filters={"instance-type": NVIDIA_TYPES}))["_meta"]["hostvars"]
    ours = inventory(env, tmp_path / "gpufleet", gpufleet_config(mixed))["_meta"]["hostvars"]
    assert set(ours) == set(theirs) == set(existing(mixed, NVIDIA_TYPES))
    assert len(ours) == 4 * len(NVIDIA_TYPES)
    for host, mine in ours.items():
        assert mine["gpufleet_private_ip"] == theirs[host]["private_ip_address"]
        assert mine["gpufleet_public_ip"] == theirs[host].get("public_ip_address")
        assert mine["gpufleet_spot"] is (theirs[host].get("instance_lifecycle") == "spot")
        assert mine["gpufleet_gpu"]["count"] >= 1
