"""Huawei Cloud: one ListServersDetails server model, and flavor extra
specs, to a record."""

from __future__ import annotations

import json

import pytest
from huaweicloudsdkecs.v2 import FlavorExtraSpec, GpuInfo, ServerAddress, ServerDetail, ServerFlavor

from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_huawei import flavor_info, record_from_server


def server(gpus=None, addresses=None, metadata=None, tags=None, status="ACTIVE"):
    return ServerDetail(
        id="uuid-1", name="trainer-1", status=status,
        flavor=ServerFlavor(id="p3.2xlarge.8", name="p3.2xlarge.8", gpus=gpus),
        addresses=addresses or {},
        os_ext_a_zavailability_zone="cn-north-4a",
        metadata=metadata or {},
        tags=tags,
    )


def test_server_with_flavor_gpus_addresses_tags():
    record = record_from_server("cn-north-4", server(
        gpus=[GpuInfo(name="NVIDIA-A100-80G", count=1, memory_mb=81920)],
        addresses={"vpc-1": [
            ServerAddress(version="6", addr="fd00::1", os_ext_ip_stype="fixed"),
            ServerAddress(version="4", addr="192.168.0.7", os_ext_ip_stype="fixed"),
            ServerAddress(version="4", addr="121.1.1.1", os_ext_ip_stype="floating"),
        ]},
        metadata={"charging_mode": "1"},
        tags=["team=ml", "standalone"],
    ), {"rdma": "ib"})
    assert record["gpu"] == {"model": "A100", "count": 1, "memory_mib": 81920}
    assert (record["private_ip"], record["public_ip"]) == ("192.168.0.7", "121.1.1.1")
    assert record["tags"] == {"team": "ml", "standalone": ""}
    assert record["charge_type"] == "subscription" and record["rdma"] == "ib"
    assert record["zone"] == "cn-north-4a" and record["instance_type"] == "p3.2xlarge.8"


def test_spot_and_gpu_from_the_flavor_when_the_server_has_none():
    record = record_from_server("cn-north-4", server(metadata={"charging_mode": "2"}, status="SHUTOFF"),
                                {"model": "nvidia-p100", "count": 1, "memory_mib": None, "rdma": "none"})
    assert record["gpu"]["model"] == "P100" and record["spot"] and record["state"] == "stopped"


def test_flavor_extra_specs_give_gpus_and_rdma():
    specs = FlavorExtraSpec(infogpus=json.dumps([{"name": "NVIDIA-L40S", "count": 2, "memory_mb": 49152}]),
                            infofeatures="roce,nvlink")
    assert flavor_info(specs) == {"rdma": "roce", "model": "NVIDIA-L40S", "count": 2, "memory_mib": 49152}
    alias = flavor_info(FlavorExtraSpec(pci_passthroughalias="nvidia-v100:8", infofeatures="ib"))
    assert (alias["model"], alias["count"], alias["rdma"]) == ("nvidia-v100", 8, "ib")
    specs_only = flavor_info(FlavorExtraSpec(pci_passthroughgpu_specs="m60:direct_graphics:1"))
    assert (specs_only["model"], specs_only["count"]) == ("m60", 1)
    assert flavor_info(FlavorExtraSpec(infogpus="not json")) == {"rdma": "none"}
    assert flavor_info(None) == {"rdma": "none"}


def test_a_gpu_flavor_without_its_gpu_fields_is_unknown_not_none():
    hollow = flavor_info(FlavorExtraSpec(ecsperformancetype="gpu"))
    assert hollow == {"rdma": "none", "gpu_unknown": True}
    record = record_from_server("cn-north-4", server(), hollow)
    assert record["gpu"]["count"] is None and record["gpu_source"] == "unknown"
    # Counts null in info:gpus are missing too, not 0.
    assert flavor_info(FlavorExtraSpec(ecsperformancetype="gpu", infogpus=json.dumps([{"name": "T4", "count": None}])))[
        "gpu_unknown"]
    # A flavor of another performance type without GPUs has none.
    cpu = flavor_info(FlavorExtraSpec(ecsperformancetype="normal"))
    assert cpu == {"rdma": "none"}
    assert record_from_server("cn-north-4", server(), cpu)["gpu"]["count"] == 0


@pytest.mark.parametrize("gpu_specs, gpu", [
    # One M60-1Q vGPU: 1 GiB of an M60's 8, an eighth of the GPU.
    ("m60_1q:virt:1", {"model": "M60", "count": 0.125, "memory_mib": 1024}),
    ("m60_2q:virt:2", {"model": "M60", "count": 0.5, "memory_mib": 2048}),
    ("t4_4q:virt:1", {"model": "T4", "count": 0.25, "memory_mib": 4096}),
])
def test_a_vgpu_profile_is_its_share_of_one_gpu(gpu_specs, gpu):
    info = flavor_info(FlavorExtraSpec(ecsperformancetype="gpu", pci_passthroughgpu_specs=gpu_specs))
    record = record_from_server("cn-north-4", server(), info)
    assert record["gpu"] == gpu and record["gpu_source"] == "api"


@pytest.mark.parametrize("gpu_specs", ["a16_2q:virt:1", "m60:virt:1", "m60_16q:virt:1"])
def test_a_vgpu_profile_whose_share_is_not_known_is_unknown_never_a_whole_gpu(gpu_specs):
    # A16's frame buffer is not in the catalogue; a profile without its
    # size says no share; 16 GiB is more than an M60 GPU has.
    info = flavor_info(FlavorExtraSpec(ecsperformancetype="gpu", pci_passthroughgpu_specs=gpu_specs))
    assert info == {"rdma": "none", "gpu_unknown": True}
    record = record_from_server("cn-north-4", server(), info)
    assert record["gpu"]["count"] is None and record["gpu_source"] == "unknown"
