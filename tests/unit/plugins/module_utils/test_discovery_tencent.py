"""Tencent Cloud: one DescribeInstances Instance model to a record."""

from __future__ import annotations

from tencentcloud.cvm.v20170312 import models

from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_tencent import family_of, record_from_instance


def instance(**fields):
    base = {"InstanceId": "ins-1", "InstanceType": "GN7.2XLARGE32", "InstanceState": "RUNNING",
            "InstanceChargeType": "POSTPAID_BY_HOUR", "Placement": {"Zone": "ap-guangzhou-3"},
            "PrivateIpAddresses": ["10.0.0.9"], "GPUInfo": {"GPUCount": 1.0, "GPUType": "NVIDIA T4"}}
    base.update(fields)
    model = models.Instance()
    model._deserialize(base)  # pylint: disable=protected-access
    return model


def test_gpu_instance_with_type_memory():
    record = record_from_instance("ap-guangzhou", instance(
        PublicIpAddresses=["119.1.1.1"], Tags=[{"Key": "team", "Value": "ml"}]), {"memory_mib": 16384})
    assert record["gpu"] == {"model": "T4", "count": 1, "memory_mib": 16384}
    assert (record["zone"], record["private_ip"], record["public_ip"]) == ("ap-guangzhou-3", "10.0.0.9", "119.1.1.1")
    assert record["tags"] == {"team": "ml"} and record["rdma"] == "none"


def test_vgpu_slice_spot_and_dedicated_host():
    vgpu = record_from_instance("ap-guangzhou", instance(
        InstanceType="GNV4.3XLARGE46", GPUInfo={"GPUCount": 0.25, "GPUType": "NVIDIA A10"},
        InstanceChargeType="SPOTPAID"))
    assert vgpu["gpu"]["count"] == 0.25 and vgpu["gpu"]["model"] == "A10" and vgpu["spot"]
    cdh = record_from_instance("ap-guangzhou", instance(InstanceChargeType="CDHPAID"))
    assert cdh["charge_type"] == "dedicated_host"


def test_hcc_families_are_on_roce():
    assert family_of("HCCPNV4h.48XLARGE1152") == "HCCPNV4h"
    hcc = record_from_instance("ap-guangzhou", instance(InstanceType="HCCPNV4h.48XLARGE1152"))
    assert hcc["rdma"] == "roce"
    by_address = record_from_instance("ap-guangzhou", instance(RdmaIpAddresses=["192.168.1.1"]))
    assert by_address["rdma"] == "roce"


def test_gpu_facts_come_from_the_type_when_gpuinfo_is_null():
    record = record_from_instance("ap-guangzhou", instance(GPUInfo=None),
                                  {"model": "NVIDIA A800", "count": 8, "memory_mib": 81920})
    assert record["gpu"] == {"model": "A800", "count": 8, "memory_mib": 81920}


def test_gpu_fields_missing_are_unknown_never_no_gpu():
    from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_tencent import TencentAdapter
    null_count = instance(GPUInfo={"GPUCount": None, "GPUType": None})
    # Asked about: its type's lookup may still have the GPU data.
    assert TencentAdapter.instance_type_of(None, null_count) == "GN7.2XLARGE32"
    record = record_from_instance("ap-guangzhou", null_count)
    assert record["gpu"] == {"model": None, "count": None, "memory_mib": None} and record["gpu_source"] == "unknown"
    # No GPUInfo on a type the catalogue knows has GPUs: missing, not none.
    absent = instance(GPUInfo=None)
    assert TencentAdapter.instance_type_of(None, absent) == "GN7.2XLARGE32"
    assert record_from_instance("ap-guangzhou", absent)["gpu_source"] == "unknown"
    # No GPUInfo on a type without GPUs: CVM's way of saying "no GPU".
    cpu = instance(InstanceType="S5.LARGE8", GPUInfo=None)
    assert TencentAdapter.instance_type_of(None, cpu) is None
    cpu_record = record_from_instance("ap-guangzhou", cpu)
    assert cpu_record["gpu"]["count"] == 0 and cpu_record["gpu_source"] == "api"
