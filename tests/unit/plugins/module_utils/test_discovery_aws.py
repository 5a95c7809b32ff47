"""AWS: one DescribeInstances instance and its DescribeInstanceTypes entry
to a record."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aws import record_from_instance, type_info

P5 = {"InstanceType": "p5.48xlarge", "NetworkInfo": {"EfaSupported": True},
      "GpuInfo": {"Gpus": [{"Name": "H100", "Manufacturer": "NVIDIA", "Count": 8, "MemoryInfo": {"SizeInMiB": 81920}}]}}


def instance(**fields):
    base = {"InstanceId": "i-1", "InstanceType": "p5.48xlarge", "State": {"Name": "running"},
            "Placement": {"AvailabilityZone": "us-east-1a", "Tenancy": "default"},
            "PrivateIpAddress": "10.0.0.5", "Tags": [{"Key": "Name", "Value": "trainer-1"}]}
    base.update(fields)
    return base


def test_gpu_and_efa_come_from_the_instance_type():
    assert type_info(P5) == {"model": "H100", "count": 8, "memory_mib": 81920, "rdma": "efa"}
    assert type_info({"InstanceType": "c5n.18xlarge", "NetworkInfo": {"EfaSupported": True}}) == {"rdma": "efa"}
    record = record_from_instance("us-east-1", instance(), type_info(P5))
    assert record["gpu"] == {"model": "H100", "count": 8, "memory_mib": 81920}
    assert record["name"] == "trainer-1" and record["rdma"] == "efa" and record["zone"] == "us-east-1a"


def test_lifecycle_and_tenancy_set_the_charge_type():
    assert record_from_instance("us-east-1", instance(InstanceLifecycle="spot"))["charge_type"] == "spot"
    block = record_from_instance("us-east-1", instance(InstanceLifecycle="capacity-block"))
    assert block["charge_type"] == "subscription"
    host = record_from_instance("us-east-1", instance(Placement={"AvailabilityZone": "us-east-1a", "Tenancy": "host"}))
    assert host["charge_type"] == "dedicated_host"
    assert record_from_instance("us-east-1", instance())["charge_type"] == "on_demand"


@pytest.mark.parametrize("lifecycle, charge", [
    ("spot", "spot"),
    # Reclaimed with the 2-minute notice spot instances get.
    ("interruptible-capacity-reservation", "spot"),
    ("capacity-block", "subscription"),
    ("scheduled", "subscription"),
    # A lifecycle EC2 adds later is not known, never "on demand".
    ("reserved-for-later", "unknown"),
])
def test_every_lifecycle_has_its_charge_type_and_a_new_one_is_unknown(lifecycle, charge):
    record = record_from_instance("us-east-1", instance(InstanceLifecycle=lifecycle))
    assert record["charge_type"] == charge and record["spot"] == (charge == "spot")


def test_an_unknown_type_leaves_the_gpu_unknown_never_empty():
    record = record_from_instance("us-east-1", instance(State={"Name": "shutting-down"}, Tags=None), None)
    assert record["gpu"] == {"model": None, "count": None, "memory_mib": None}
    assert record["gpu_source"] == "unknown"
    assert record["state"] == "terminating" and record["name"] is None


def test_a_known_type_without_gpus_has_none_from_the_api():
    record = record_from_instance("us-east-1", instance(InstanceType="m5.large"), {"rdma": "none"})
    assert record["gpu"]["count"] == 0 and record["gpu_source"] == "api"


def test_gpu_info_without_its_gpus_or_counts_is_unknown_not_none():
    for gpu_info in ({}, {"Gpus": []}, {"Gpus": [{"Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 22888}}]}):
        info = type_info({"InstanceType": "g5.xlarge", "GpuInfo": gpu_info})
        assert info == {"rdma": "none", "gpu_unknown": True}, gpu_info
        record = record_from_instance("us-east-1", instance(InstanceType="g5.xlarge"), info)
        assert record["gpu"]["count"] is None and record["gpu_source"] == "unknown"
    # No GpuInfo at all is EC2's "no GPU".
    assert type_info({"InstanceType": "m5.large"}) == {"rdma": "none"}


# A fractional-GPU type as DescribeInstanceTypes gives it (GpuDeviceInfo's
# gpuPartitionSize and logicalGpuCount): an eighth of an L4, Count 0.
G6F = {"InstanceType": "g6f.large", "GpuInfo": {"Gpus": [
    {"Name": "L4", "Manufacturer": "NVIDIA", "Count": 0, "GpuPartitionSize": 0.125, "LogicalGpuCount": 1,
     "MemoryInfo": {"SizeInMiB": 2861}}], "TotalGpuMemoryInMiB": 2861}}


def test_a_partitioned_gpu_is_the_share_it_is_never_no_gpu():
    assert type_info(G6F) == {"model": "L4", "count": 0.125, "memory_mib": 2861, "rdma": "none"}
    record = record_from_instance("us-east-1", instance(InstanceType="g6f.large"), type_info(G6F))
    assert record["gpu"]["count"] == 0.125 and record["gpu_source"] == "api"
    # Whole GPUs with a partition size of 1 are whole GPUs.
    whole = {"InstanceType": "g6.xlarge", "GpuInfo": {"Gpus": [
        {"Name": "L4", "Count": 1, "GpuPartitionSize": 1.0, "LogicalGpuCount": 1, "MemoryInfo": {"SizeInMiB": 22888}}]}}
    assert type_info(whole)["count"] == 1


def test_a_partition_without_its_device_count_is_unknown():
    gpus = [dict(G6F["GpuInfo"]["Gpus"][0], LogicalGpuCount=None)]
    assert type_info({"InstanceType": "g6f.large", "GpuInfo": {"Gpus": gpus}}) == {"rdma": "none", "gpu_unknown": True}
