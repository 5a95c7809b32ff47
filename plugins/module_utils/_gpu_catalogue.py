# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A built-in catalogue of GPU instance families on the four clouds.

Private to gpufleet.cloud. The shared discovery flow (_discovery.py) asks
it only for an instance whose GPU data the cloud's API did not give (a
failed type lookup, GPU fields missing or null); such a record then says
``gpu_source: catalogue``. A type that is in neither stays ``unknown``.

Each family is taken from its vendor's documentation, cited next to it.
A figure the documentation does not give, or that could not be confirmed,
is left out: a size missing from a family is not in the catalogue, and a
memory size of None stays unknown; a family whose GPU model no page names
is not in the catalogue at all. Every size is listed by name, as the page
lists it.

What was checked against what:
- AWS: against real API data, moto's copy of EC2's DescribeInstanceTypes,
  by the tests (41 of the 44 AWS types are in it); the AWS pages were not
  re-read when the other clouds were checked.
- Alibaba Cloud: every family's model, memory per GPU and sizes against
  Elastic GPU Service's instance family page (cited below), except the
  A100 of gn7 and ebmgn7, which that page does not name: it is from
  Alibaba's own earlier edition of the same tables (cited).
- Tencent Cloud: every family against the GPU computing instance page
  (cited below).
- Huawei Cloud: the GPU model of p1, p2s, p2v and pi2 against Huawei
  Cloud's own ECS user guide (cited below). Their sizes, GPU counts and
  memory per GPU are on no Huawei Cloud page that could be read: those are
  from the same Huawei topic as Open Telekom Cloud publishes it (cited
  below), so a Huawei Cloud flavor with other figures would not be seen.
tests/unit/plugins/module_utils/test_gpu_catalogue.py also checks every
entry against the API's own data wherever both exist (moto's EC2 data,
the emulators' type data: 5 Alibaba, 5 Tencent and 3 Huawei types), so a
wrong figure there fails a test that names the type.
Pure data and functions: no SDK, no network.
"""

from __future__ import annotations

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr


class Family:
    """GPU facts shared by a family's sizes: ``model`` (short form, as
    _gpu_record.normalize_gpu_model gives it), ``memory_mib`` of one GPU
    (None: not documented) and ``sizes`` {size: GPU count}, each size as
    the vendor's page lists it."""

    __slots__ = ("model", "memory_mib", "sizes")

    def __init__(self, model, memory_mib, sizes):
        self.model = model
        self.memory_mib = memory_mib
        self.sizes = dict(sizes)

    def count(self, size):
        return self.sizes.get(size)


def _sizes(counts):
    """{size: count} from (count, sizes...) groups."""
    return {size: count for count, *sizes in counts for size in sizes}


# -- AWS ---------------------------------------------------------------------
# Source: Amazon EC2 "Accelerated computing instance specifications",
# https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, and the
# family pages https://aws.amazon.com/ec2/instance-types/p3/, /p4/, /p5/,
# /p6/, /g4/, /g5/, /g6/, /g6e/. Memory is per GPU in MiB as EC2's
# DescribeInstanceTypes reports it (GpuInfo.Gpus[].MemoryInfo.SizeInMiB,
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_GpuDeviceMemoryInfo.html):
# the API gives the usable size, so an A10G, marketed as 24 GB, is 22888.
_AWS_SMALL_ONE = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")
AWS = {
    "p3": Family("V100", 16384, _sizes([(1, "2xlarge"), (4, "8xlarge"), (8, "16xlarge")])),
    "p3dn": Family("V100", 32768, {"24xlarge": 8}),
    "p4d": Family("A100", 40960, {"24xlarge": 8}),
    "p4de": Family("A100", 81920, {"24xlarge": 8}),
    "p5": Family("H100", 81920, {"4xlarge": 1, "48xlarge": 8}),
    "p5e": Family("H200", 144384, {"48xlarge": 8}),
    "p5en": Family("H200", 144384, {"48xlarge": 8}),
    "p6-b200": Family("B200", 183359, {"48xlarge": 8}),
    "g4dn": Family("T4", 16384, _sizes([(1,) + _AWS_SMALL_ONE, (4, "12xlarge"), (8, "metal")])),
    "g5": Family("A10G", 22888, _sizes([(1,) + _AWS_SMALL_ONE, (4, "12xlarge", "24xlarge"), (8, "48xlarge")])),
    "g6": Family("L4", 22888, _sizes([(1,) + _AWS_SMALL_ONE, (4, "12xlarge", "24xlarge"), (8, "48xlarge")])),
    "g6e": Family("L40S", 45776, _sizes([(1,) + _AWS_SMALL_ONE, (4, "12xlarge", "24xlarge"), (8, "48xlarge")])),
    "gr6": Family("L4", 22888, {"4xlarge": 1, "8xlarge": 1}),
}

# -- Alibaba Cloud -------------------------------------------------------------
# Source: Elastic GPU Service, "GPU-accelerated compute-optimized instance
# families (gn, ebm and scc series)",
# https://www.alibabacloud.com/help/en/egs/gpu-accelerated-compute-optimized-instance-families
# (a table per family: each type's GPUs and GPU memory). Sizes are listed
# one by one, as there. The name's vCPU-to-GPU part (c24g1) is not used to
# count: the page's ecs.gn5-c8g1.14xlarge has 54 vCPUs and 8 GPUs, not the
# 7 it would give, and ecs.gn7i-4x.8xlarge or ecs.gn8is.2xlarge have none.
# Types the page does not list (retired sizes) are not in the catalogue.
# The page names no GPU model for gn7 and ebmgn7, only 40 GB per GPU; their
# A100 is from Alibaba's earlier edition of the tables, the AlibabaCloudDocs
# repository, https://github.com/AlibabaCloudDocs/ecs (commit 322eaab,
# 2021): intl.en-US/Instance/Instance type families/Compute optimized type
# family with GPU/GPU-accelerated compute optimized instance types.md (gn7)
# and .../ECS Bare Metal Instance types/Overview.md (ebmgn7).
# Left out:
# - gn7e (1, 2, 4 or 8 GPUs of 80 GB), ebmgn7e (8 of 80 GB) and gn8v (1 to 8
#   of 96 GB): the page gives no GPU model for them, and no Alibaba page
#   seen does;
# - ebmgn7ex: not on the page; no Alibaba page for it was found.
ALIYUN = {
    "gn5": Family("P100", 16384, _sizes([(1, "c4g1.xlarge", "c8g1.2xlarge", "c28g1.7xlarge"),
                                         (2, "c4g1.2xlarge", "c8g1.4xlarge", "c28g1.14xlarge"),
                                         (4, "c8g1.8xlarge"), (8, "c8g1.14xlarge")])),
    "gn5i": Family("P4", 8192, _sizes([(1, "c2g1.large", "c4g1.xlarge", "c8g1.2xlarge", "c16g1.4xlarge"),
                                       (2, "c16g1.8xlarge", "c28g1.14xlarge")])),
    "gn6i": Family("T4", 16384, _sizes([(1, "c4g1.xlarge", "c8g1.2xlarge", "c16g1.4xlarge", "c24g1.6xlarge",
                                         "c40g1.10xlarge"), (2, "c24g1.12xlarge"), (4, "c24g1.24xlarge")])),
    "gn6v": Family("V100", 16384, _sizes([(1, "c8g1.2xlarge"), (2, "c8g1.4xlarge"), (4, "c8g1.8xlarge"),
                                          (8, "c8g1.16xlarge", "c10g1.20xlarge")])),
    "gn6e": Family("V100", 32768, _sizes([(1, "c12g1.3xlarge"), (2, "c12g1.6xlarge"), (4, "c12g1.12xlarge"),
                                          (8, "c12g1.24xlarge")])),
    "gn7": Family("A100", 40960, _sizes([(1, "c12g1.3xlarge"), (4, "c13g1.13xlarge"), (8, "c13g1.26xlarge")])),
    "gn7i": Family("A10", 24576, _sizes([(1, "c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c48g1.12xlarge",
                                          "c56g1.14xlarge"), (2, "c32g1.16xlarge", "2x.8xlarge"),
                                         (4, "c32g1.32xlarge", "4x.8xlarge", "4x.16xlarge"),
                                         (8, "8x.16xlarge", "8x.32xlarge")])),
    # Bare metal: one size, the whole machine's eight GPUs.
    "ebmgn7": Family("A100", 40960, {"26xlarge": 8}),
    "gn8is": Family("L20", 49152, _sizes([(1, "2xlarge", "4xlarge"), (2, "2x.8xlarge"), (4, "4x.16xlarge"),
                                          (8, "8x.32xlarge")])),
}

# -- Tencent Cloud -------------------------------------------------------------
# Source: GPU Cloud Computing, "Computing Instance",
# https://www.tencentcloud.com/document/product/560/19701 (English edition;
# a table per family). Sizes are listed one by one, as there; the name does
# not encode the count. GN8 and GN6/GN6S give the memory of all the type's
# GPUs together (GN8.3XLARGE112: 48 GB for 2 P40s); it is per GPU here.
# Left out: GN7's vGPU sizes (GN7.LARGE20, a quarter of a T4, and
# GN7.2XLARGE40, a half): the catalogue lists whole GPUs only.
TENCENT = {
    "GN7": Family("T4", 16384, _sizes([(1, "2XLARGE32", "5XLARGE80", "8XLARGE128"), (2, "10XLARGE160"),
                                       (4, "20XLARGE320")])),
    "GN10X": Family("V100", 32768, _sizes([(1, "2XLARGE40"), (4, "9XLARGE160"), (8, "18XLARGE320")])),
    "GN10Xp": Family("V100", 32768, _sizes([(1, "2XLARGE40"), (2, "5XLARGE80"), (4, "10XLARGE160"),
                                            (8, "20XLARGE320")])),
    "GT4": Family("A100", 40960, _sizes([(1, "4XLARGE96"), (2, "8XLARGE192"), (4, "20XLARGE474"),
                                         (8, "41XLARGE948")])),
    "PNV4": Family("A10", 24576, _sizes([(1, "7XLARGE116"), (2, "14XLARGE232"), (4, "28XLARGE466"),
                                         (8, "56XLARGE932")])),
    "GI3X": Family("T4", 16384, _sizes([(1, "8XLARGE64"), (2, "22XLARGE226"), (4, "45XLARGE452")])),
    "GN8": Family("P40", 24576, _sizes([(1, "LARGE56"), (2, "3XLARGE112"), (4, "7XLARGE224"), (8, "14XLARGE448")])),
    "GN6": Family("P4", 8192, _sizes([(1, "7XLARGE48"), (2, "14XLARGE96")])),
    "GN6S": Family("P4", 8192, _sizes([(1, "LARGE20"), (2, "2XLARGE40")])),
}

# -- Huawei Cloud --------------------------------------------------------------
# GPU model: Huawei Cloud's own ECS user guide, the page on getting the
# Tesla driver and CUDA toolkit (Chinese edition, topic ecs_03_0173),
# https://support.huaweicloud.com/usermanual-ecs/ecs_03_0173.html, read in
# the source Huawei publishes for it, https://github.com/huaweicloudDocs/ecs
# (the cn.zh-cn user guide's page of that topic, commit bd661ad, April
# 2024): its table of instance types gives P1 the P100, P2s and P2v the
# V100 and Pi2 the T4 (and P2vs the V100, Pi1 the P4, G6 the T4).
# Sizes, GPU counts and memory per GPU: on no Huawei Cloud page that could
# be read. Huawei Cloud's ECS "GPU-accelerated ECSs" page,
# https://support.huaweicloud.com/intl/en-us/productdesc-ecs/ecs_01_0045.html
# (Chinese: https://support.huaweicloud.com/productdesc-ecs/ecs_01_0045.html),
# and its discontinued-specifications page are not in the material that
# could be read, and huaweicloudDocs/ecs holds no product description. The
# figures are kept because Open Telekom Cloud, a cloud built on Huawei's
# ECS, publishes that same Huawei topic (en-us_topic_0097289624) with them,
# in https://github.com/opentelekomcloud-docs/elastic-cloud-server: p2s, p2v
# and pi2 in umn/source/service_overview/ecs_types_and_specifications/
# ecs_specifications/gpu-accelerated_ecss.rst (commit efcbeed), p1, which
# that edition dropped in August 2024, in umn/source/service_overview/
# ecs_specifications_and_types/gpu-accelerated_ecss.rst at commit e0f94f4.
# Huawei's guide and that edition agree on every model; a size or figure
# only Huawei Cloud sells otherwise would not be seen, and sizes only that
# edition lists (pi2.3xlarge.4, pi2.16xlarge.4) are not added.
# Left out: p2vs and pi1 (Huawei's guide names their GPUs, but no page
# listing their sizes was found); g6, whose sizes on Huawei Cloud were not
# confirmed.
_HUAWEI_P = ("2xlarge.8", "4xlarge.8", "8xlarge.8", "16xlarge.8")
_HUAWEI_PI = ("2xlarge.4", "4xlarge.4", "8xlarge.4")
HUAWEI = {
    # Each: model per Huawei's guide; sizes, counts and memory per OTC's
    # edition only (p1: commit e0f94f4; p2s, p2v, pi2: commit efcbeed).
    "p1": Family("P100", 16384, dict(zip(_HUAWEI_P[:3], (1, 2, 4)))),
    "p2s": Family("V100", 32768, dict(zip(_HUAWEI_P, (1, 2, 4, 8)))),
    "p2v": Family("V100", 16384, dict(zip(_HUAWEI_P, (1, 2, 4, 8)))),
    "pi2": Family("T4", 16384, dict(zip(_HUAWEI_PI, (1, 2, 4)))),
}

CATALOGUE = {"aws": AWS, "aliyun": ALIYUN, "tencent": TENCENT, "huawei": HUAWEI}


# -- vGPU profiles --------------------------------------------------------------
# A vGPU profile is named for its board and its frame buffer in GiB, with a
# series letter: M60-1Q is 1 GiB of an M60 GPU. The frame buffer of one
# whole physical GPU is that board's largest profile (M60-8Q, T4-16Q,
# A10-24Q), per NVIDIA's Virtual GPU Software User Guide, "Virtual GPU
# Types for Supported GPUs",
# https://docs.nvidia.com/vgpu/latest/grid-vgpu-user-guide/index.html.
# Huawei's G1 flavors name such a profile ("m60_1q:virt:1", the ECS API's
# flavor extra specs, pci_passthrough:gpu_specs). A board not listed here
# leaves a profile's share unknown.
VGPU_WHOLE_GIB = {"M60": 8, "T4": 16, "A10": 24}


def vgpu_share(model, profile_gib):
    """The share of one GPU that a vGPU profile of ``profile_gib`` GiB on
    ``model`` is, or None when the board's frame buffer is not known."""
    whole = VGPU_WHOLE_GIB.get(model)
    if not whole or not 0 < profile_gib <= whole:
        return None
    return profile_gib / whole


def split_type(provider, instance_type):
    """(family, size) of an instance type name in ``provider``'s naming:
    p4d.24xlarge, ecs.gn7i-c8g1.2xlarge, GN7.2XLARGE32, pi2.2xlarge.4."""
    name = str(instance_type or "")
    if provider == "aliyun":
        name = name[4:] if name.startswith("ecs.") else name
        # ecs.gn7i-c8g1.2xlarge and ecs.gn8is-2x.8xlarge put a size part
        # after a dash; ecs.gn8is.2xlarge and bare-metal families
        # (ecs.ebmgn7.26xlarge) do not.
        family, sep, size = name.partition("-")
        if not sep:
            family, _dot, size = name.partition(".")
        return family, size
    family, _dot, size = name.partition(".")
    return family, size


def lookup(provider, instance_type):
    """The ``gpu`` part of a record for ``instance_type`` from the catalogue,
    or None when the catalogue does not know the type (or its GPU count)."""
    family_name, size = split_type(provider, instance_type)
    family = CATALOGUE.get(provider, {}).get(family_name)
    if family is None or not size:
        return None
    count = family.count(size)
    if not count:
        return None
    return gr.gpu_info(family.model, count, family.memory_mib)


def type_name(provider, family, size):
    """The instance type name of ``family`` and ``size`` (split_type's
    inverse): ecs.gn7i-c8g1.2xlarge, ecs.gn8is.2xlarge, GN7.2XLARGE32."""
    if provider == "aliyun":
        return "ecs.%s%s%s" % (family, "-" if "." in size else ".", size)
    return "%s.%s" % (family, size)


def entries(provider):
    """Every (instance type, gpu) the catalogue lists for ``provider``."""
    for family_name, family in sorted(CATALOGUE[provider].items()):
        for size in sorted(family.sizes):
            name = type_name(provider, family_name, size)
            yield name, lookup(provider, name)
