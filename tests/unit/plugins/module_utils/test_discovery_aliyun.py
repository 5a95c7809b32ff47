"""Alibaba Cloud: one DescribeInstances instance model to a record."""

from __future__ import annotations

import pytest
from alibabacloud_ecs20140526 import models

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aliyun import AliyunAdapter, gpus, record_from_instance

Instance = models.DescribeInstancesResponseBodyInstancesInstance


def instance(**fields):
    base = {"InstanceId": "i-1", "InstanceType": "ecs.gn7i-c8g1.2xlarge", "Status": "Running", "ZoneId": "cn-hangzhou-h",
            "GPUSpec": "NVIDIA A10", "GPUAmount": 1, "InstanceChargeType": "PostPaid", "SpotStrategy": "NoSpot"}
    base.update(fields)
    return Instance().from_map(base)


def test_vpc_instance_with_type_data():
    record = record_from_instance("cn-hangzhou", instance(
        VpcAttributes={"PrivateIpAddress": {"IpAddress": ["172.16.0.5"]}},
        PublicIpAddress={"IpAddress": ["47.1.2.3"]},
        Tags={"Tag": [{"TagKey": "team", "TagValue": "ml"}, {"TagKey": "empty"}]},
        InstanceName="trainer-1",
    ), {"memory_mib": 24576, "erdma": True})
    assert record["gpu"] == {"model": "A10", "count": 1, "memory_mib": 24576}
    assert (record["private_ip"], record["public_ip"], record["name"]) == ("172.16.0.5", "47.1.2.3", "trainer-1")
    assert record["tags"] == {"team": "ml", "empty": ""}
    assert record["rdma"] == "erdma" and record["charge_type"] == "on_demand" and not record["spot"]


def test_classic_network_and_eip_addresses():
    record = record_from_instance("cn-hangzhou", instance(
        InnerIpAddress={"IpAddress": ["10.1.1.1"]}, EipAddress={"IpAddress": "39.9.9.9"}))
    assert (record["private_ip"], record["public_ip"]) == ("10.1.1.1", "39.9.9.9")


def test_spot_subscription_and_rdma_addresses():
    spot = record_from_instance("cn-hangzhou", instance(SpotStrategy="SpotWithPriceLimit"))
    assert spot["spot"] and spot["charge_type"] == "spot"
    prepaid = record_from_instance("cn-hangzhou", instance(InstanceChargeType="PrePaid"))
    assert prepaid["charge_type"] == "subscription"
    scc = record_from_instance("cn-hangzhou", instance(RdmaIpAddress={"IpAddress": ["192.168.0.5"]}),
                               {"erdma": True})
    assert scc["rdma"] == "roce"


def test_cpu_instance_has_no_gpu():
    record = record_from_instance("cn-hangzhou", instance(GPUSpec="", GPUAmount=0, Status="Stopped"))
    assert record["gpu"] == {"model": None, "count": 0, "memory_mib": None}
    assert record["state"] == "stopped"


def test_gpu_fields_missing_come_from_the_type_else_are_unknown():
    from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aliyun import AliyunAdapter
    bare = instance(GPUSpec=None, GPUAmount=None)
    # Looked up, as a GPU instance is.
    assert AliyunAdapter.instance_type_of(None, bare) == "ecs.gn7i-c8g1.2xlarge"
    from_type = record_from_instance("cn-hangzhou", bare, {"model": "NVIDIA A10", "count": 1, "memory_mib": 24576})
    assert from_type["gpu"] == {"model": "A10", "count": 1, "memory_mib": 24576} and from_type["gpu_source"] == "api"
    for type_data in (None, {"model": None, "count": None, "memory_mib": None}):
        record = record_from_instance("cn-hangzhou", bare, type_data)
        assert record["gpu"] == {"model": None, "count": None, "memory_mib": None}
        assert record["gpu_source"] == "unknown"


# A vGPU type says its slice in GPUSpec; the SDK's GPUAmount is a whole
# number beside it (1, 0 or absent), never the share.
@pytest.mark.parametrize("amount, count", [(1, 0.1667), (0, 0.1667), (None, 0.1667), (2, 0.3333)])
def test_a_vgpu_slice_in_gpuspec_is_the_count_never_a_whole_gpu_or_none(amount, count):
    record = record_from_instance("cn-hangzhou", instance(
        InstanceType="ecs.vgn7i-vws-m4.xlarge", GPUSpec="NVIDIA A10 * 1/6", GPUAmount=amount), {"memory_mib": 4096})
    assert record["gpu"] == {"model": "A10", "count": count, "memory_mib": 4096}
    assert record["gpu_source"] == "api" and gr.matches(record, gpu_only=True)


def test_a_slice_only_the_type_says_is_the_count():
    # The instance's own GPUSpec empty: the type's (DescribeInstanceTypes) decides.
    record = record_from_instance("cn-hangzhou", instance(GPUSpec="", GPUAmount=1),
                                  {"model": "NVIDIA A10 * 1/12", "count": gpus("NVIDIA A10 * 1/12", 1)})
    assert record["gpu"]["count"] == 0.0833 and record["gpu"]["model"] == "A10"


def test_a_vgpu_instance_with_gpuamount_0_has_its_type_looked_up():
    adapter = AliyunAdapter.__new__(AliyunAdapter)
    assert adapter.instance_type_of(instance(GPUSpec="NVIDIA A10 * 1/6", GPUAmount=0)) == "ecs.gn7i-c8g1.2xlarge"
    assert adapter.instance_type_of(instance(GPUSpec="", GPUAmount=0)) is None


@pytest.mark.parametrize("spec, share", [
    ("NVIDIA A10 * 1/6", 1 / 6), ("NVIDIA A10*1/12", 1 / 12), ("NVIDIA T4 * 1/2", 0.5),
    ("NVIDIA A10", None), ("NVIDIA A10 * 1/1", None), ("NVIDIA A10 * 0/4", None), ("NVIDIA A10 * 2", None),
    (None, None), ("", None),
])
def test_slice_of_reads_only_a_share_below_one_gpu(spec, share):
    assert gr.slice_of(spec) == share
