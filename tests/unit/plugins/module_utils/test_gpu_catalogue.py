"""The built-in GPU catalogue against the APIs' own data, wherever both
exist: moto's copy of EC2's DescribeInstanceTypes data for AWS, and the
emulators' type data (in the shapes their APIs answer) for the others.
A disagreement fails, naming the type."""

from __future__ import annotations

import json

import pytest
from moto.ec2.models.instance_types import INSTANCE_TYPES

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue as cat
from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aws import type_info
from gpufleet.lab._cloud import aliyun
from tests.emulators import huawei, tencent


def api_gpus_aws():
    """{type: gpu} for every type moto knows with GPUs, as the adapter reads them."""
    found = {}
    for name, item in INSTANCE_TYPES.items():
        info = type_info(item)
        if info.get("count"):
            found[name] = gr.gpu_info(info["model"], info["count"], info["memory_mib"])
    return found


def api_gpus_aliyun():
    return {name: gr.gpu_info(t["GPUSpec"], t["GPUAmount"], gr.mib(t["GPUMemorySize"], "GiB"))
            for name, t in ((n, aliyun._instance_type(n)) for n in aliyun.CATALOG) if t["GPUAmount"]}


def api_gpus_tencent():
    return {name: gr.gpu_info(t["GpuType"], t["GpuCount"], gr.mib(t["GpuMemory"], "GiB"))
            for name, t in ((n, tencent._type_config(n, "zone-1")) for n in tencent.CATALOG) if t["GpuCount"]}


def api_gpus_huawei():
    found = {}
    for name in huawei.CATALOG:
        specs = huawei._flavor(name)["os_extra_specs"]
        gpus = json.loads(specs.get("info:gpus") or "[]")
        if gpus:
            found[name] = gr.gpu_info(gpus[0]["name"], sum(g["count"] for g in gpus), gr.mib(gpus[0]["memory_mb"]))
        elif specs.get("pci_passthrough:alias"):
            # Old flavors (p1) give their GPUs as the PCI alias only: "nvidia-p100:1".
            model, count = specs["pci_passthrough:alias"].split(":")
            found[name] = gr.gpu_info(model, int(count))
    return found


API = {"aws": api_gpus_aws, "aliyun": api_gpus_aliyun, "tencent": api_gpus_tencent, "huawei": api_gpus_huawei}


def disagreements(provider, api):
    """'type: catalogue ... API ...' for each type both know and disagree on.
    Memory is compared where both give it (the catalogue leaves out what
    the vendor does not document)."""
    wrong = []
    for name, theirs in sorted(api.items()):
        ours = cat.lookup(provider, name)
        if ours is None:
            continue
        same = ours["model"] == theirs["model"] and ours["count"] == theirs["count"] and (
            None in (ours["memory_mib"], theirs["memory_mib"]) or ours["memory_mib"] == theirs["memory_mib"])
        if not same:
            wrong.append("%s: catalogue %s, API %s" % (name, ours, theirs))
    return wrong


@pytest.mark.parametrize("provider", sorted(API))
def test_the_catalogue_agrees_with_the_api_wherever_both_know_a_type(provider):
    api = API[provider]()
    compared = [name for name in api if cat.lookup(provider, name)]
    # Not vacuous: each cloud's API data covers part of the catalogue.
    assert len(compared) >= {"aws": 40}.get(provider, 3), compared
    assert disagreements(provider, api) == []


def test_every_aws_type_the_catalogue_names_that_moto_knows_has_gpus_there():
    # A catalogue size that EC2 sells without GPUs would be a wrong entry.
    named = [name for name, _gpu in cat.entries("aws") if name in INSTANCE_TYPES]
    assert len(named) >= 40
    assert [n for n in named if n not in api_gpus_aws()] == []


def test_a_disagreement_fails_naming_the_type():
    api = {"p4d.24xlarge": gr.gpu_info("A100", 4, 40960), "g5.xlarge": gr.gpu_info("A10G", 1, 22888),
           "g6e.xlarge": gr.gpu_info("L40S", 1, 49152)}
    wrong = disagreements("aws", api)
    assert len(wrong) == 2
    assert wrong[0].startswith("g6e.xlarge:") and wrong[1].startswith("p4d.24xlarge:")


@pytest.mark.parametrize("provider, name, gpu", [
    ("aws", "p3.8xlarge", {"model": "V100", "count": 4, "memory_mib": 16384}),
    ("aws", "p3.4xlarge", None),
    ("aliyun", "ecs.gn6i-c24g1.12xlarge", {"model": "T4", "count": 2, "memory_mib": 16384}),
    ("aliyun", "ecs.gn5i-c2g1.large", {"model": "P4", "count": 1, "memory_mib": 8192}),
    ("aliyun", "ecs.gn6v-c10g1.20xlarge", {"model": "V100", "count": 8, "memory_mib": 16384}),
    ("aliyun", "ecs.gn8is-4x.16xlarge", {"model": "L20", "count": 4, "memory_mib": 49152}),
    ("aliyun", "ecs.gn8is.2xlarge", {"model": "L20", "count": 1, "memory_mib": 49152}),
    ("aliyun", "ecs.gn7i-4x.8xlarge", {"model": "A10", "count": 4, "memory_mib": 24576}),
    # 40 GB per GPU on the page; the page's A100 is from Alibaba's earlier edition.
    ("aliyun", "ecs.gn7-c13g1.26xlarge", {"model": "A100", "count": 8, "memory_mib": 40960}),
    # 54 vCPUs and 8 GPUs on the page: the name's c8g1 would make it 7.
    ("aliyun", "ecs.gn5-c8g1.14xlarge", {"model": "P100", "count": 8, "memory_mib": 16384}),
    # Not a size the page lists.
    ("aliyun", "ecs.gn6i-c6g1.xlarge", None),
    # Counts and memory on the page, but no GPU model named: not in the catalogue.
    ("aliyun", "ecs.gn7e-c16g1.4xlarge", None),
    ("aliyun", "ecs.gn8v-8x.48xlarge", None),
    ("aliyun", "ecs.g7.xlarge", None),
    ("tencent", "GN10Xp.20XLARGE320", {"model": "V100", "count": 8, "memory_mib": 32768}),
    # The page gives 192 GB for the type's 8 GPUs together.
    ("tencent", "GN8.14XLARGE448", {"model": "P40", "count": 8, "memory_mib": 24576}),
    # A quarter of a T4: the catalogue lists whole GPUs only.
    ("tencent", "GN7.LARGE20", None),
    ("huawei", "p2v.16xlarge.8", {"model": "V100", "count": 8, "memory_mib": 16384}),
    # No page listing p2vs was found: not in the catalogue.
    ("huawei", "p2vs.16xlarge.8", None),
    ("huawei", "g6.10xlarge.7", None),
    ("huawei", None, None),
])
def test_lookup_by_family_and_size(provider, name, gpu):
    assert cat.lookup(provider, name) == gpu


def test_every_entry_is_a_gpu_record_part():
    for provider in cat.CATALOGUE:
        for name, gpu in cat.entries(provider):
            assert gpu is not None and gpu["count"] >= 1 and gpu["model"], (provider, name)
            # Models are stored in the record's own short form.
            assert gr.normalize_gpu_model(gpu["model"]) == gpu["model"], (provider, name)
