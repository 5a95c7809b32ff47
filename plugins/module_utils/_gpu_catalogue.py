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
memory size of None stays unknown. tests/unit/plugins/module_utils/
test_gpu_catalogue.py checks every entry against the API's own data
wherever both exist (moto's copy of EC2's DescribeInstanceTypes data, the
emulators' type data), so a wrong figure fails a test that names the type.
Checked against real API data: AWS only (moto's copy, 58 types). The
Alibaba, Tencent and Huawei figures follow the cited pages as their
authors read them, and are checked only against the emulators' few types:
verify them against the live pages before relying on an entry there.
Pure data and functions: no SDK, no network.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr


class Family:
    """GPU facts shared by a family's sizes: ``model`` (short form, as
    _gpu_record.normalize_gpu_model gives it), ``memory_mib`` of one GPU
    (None: not documented) and ``sizes`` {size: GPU count}; ``rule``, where
    the vendor's naming convention encodes the count, computes it from the
    size instead."""

    __slots__ = ("model", "memory_mib", "sizes", "rule")

    def __init__(self, model, memory_mib, sizes=None, rule=None):
        self.model = model
        self.memory_mib = memory_mib
        self.sizes = dict(sizes or {})
        self.rule = rule

    def count(self, size):
        if size in self.sizes:
            return self.sizes[size]
        return self.rule(size) if self.rule else None


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
# Source: "GPU-accelerated compute-optimized instance families",
# https://www.alibabacloud.com/help/en/ecs/user-guide/gpu-accelerated-compute-optimized-and-vgpu-accelerated-instance-families-1
# (models and memory per GPU), and Elastic GPU Service "Instance naming
# conventions", https://help.aliyun.com/en/egs/instance-naming-conventions:
# in ecs.gn6i-c24g1.12xlarge, 12xlarge is 48 vCPUs (xlarge 4, nxlarge 4n,
# large 2) and c24g1 is 24 vCPUs to 1 GPU, so 2 GPUs; in
# ecs.gn8is-2x.8xlarge, 2x is the GPU count.
_ALIYUN_RATIO = re.compile(r"^c(\d+)g(\d+)\.(\d*)x?large$")
_ALIYUN_TIMES = re.compile(r"^(\d+)x\.\d*x?large$")


def _aliyun_ratio(size):
    match = _ALIYUN_RATIO.match(size)
    if not match:
        return None
    per_gpu, gpus, times = int(match.group(1)), int(match.group(2)), match.group(3)
    vcpus = 2 if not size.endswith("xlarge") else 4 * int(times or 1)
    count, rest = divmod(vcpus * gpus, per_gpu)
    # A size the convention cannot divide is not one the vendor sells.
    return count if count and not rest else None


def _aliyun_times(size):
    match = _ALIYUN_TIMES.match(size)
    return int(match.group(1)) if match else None


ALIYUN = {
    "gn5": Family("P100", 16384, rule=_aliyun_ratio),
    "gn5i": Family("P4", 8192, rule=_aliyun_ratio),
    "gn6i": Family("T4", 16384, rule=_aliyun_ratio),
    # Naming conventions: v is V100 with 16 GB, e (6e) V100 with 32 GB.
    "gn6v": Family("V100", 16384, rule=_aliyun_ratio),
    "gn6e": Family("V100", 32768, rule=_aliyun_ratio),
    # gn7's and ebmgn7's memory per GPU is not confirmed: left out.
    "gn7": Family("A100", None, rule=_aliyun_ratio),
    "gn7i": Family("A10", 24576, rule=_aliyun_ratio),
    "gn7e": Family("A100", 81920, rule=_aliyun_ratio),
    # Bare metal: one size, the whole machine's eight GPUs.
    "ebmgn7": Family("A100", None, {"26xlarge": 8}),
    "ebmgn7e": Family("A100", 81920, {"32xlarge": 8}),
    "ebmgn7ex": Family("A100", 81920, {"32xlarge": 8}),
    "gn8is": Family("L20", 49152, rule=_aliyun_times),
    "gn8v": Family("H20", 98304, rule=_aliyun_times),
}

# -- Tencent Cloud -------------------------------------------------------------
# Source: CVM "Instance Types", GPU computing instances,
# https://www.tencentcloud.com/document/product/560/19701 (the Chinese
# edition: https://cloud.tencent.com/document/product/560/19701). Sizes
# there are listed one by one; the name does not encode the count.
# GN6 and GN8 (P4, P40) are left out: their size lists are not confirmed.
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
}

# -- Huawei Cloud --------------------------------------------------------------
# Source: ECS "GPU-accelerated ECSs",
# https://support.huaweicloud.com/intl/en-us/productdesc-ecs/ecs_01_0045.html
# (flavor tables of the P and Pi families). The g6 graphics family is left
# out: its vGPU split per flavor is not confirmed.
_HUAWEI_P = ("2xlarge.8", "4xlarge.8", "8xlarge.8", "16xlarge.8")
_HUAWEI_PI = ("2xlarge.4", "4xlarge.4", "8xlarge.4")
HUAWEI = {
    "p1": Family("P100", 16384, dict(zip(_HUAWEI_P[:3], (1, 2, 4)))),
    "p2s": Family("V100", 32768, dict(zip(_HUAWEI_P, (1, 2, 4, 8)))),
    "p2v": Family("V100", 16384, dict(zip(_HUAWEI_P, (1, 2, 4, 8)))),
    "p2vs": Family("V100", 32768, dict(zip(_HUAWEI_P, (1, 2, 4, 8)))),
    "pi1": Family("P4", 8192, dict(zip(_HUAWEI_PI, (1, 2, 4)))),
    "pi2": Family("T4", 16384, dict(zip(_HUAWEI_PI, (1, 2, 4)))),
}

CATALOGUE = {"aws": AWS, "aliyun": ALIYUN, "tencent": TENCENT, "huawei": HUAWEI}


def split_type(provider, instance_type):
    """(family, size) of an instance type name in ``provider``'s naming:
    p4d.24xlarge, ecs.gn7i-c8g1.2xlarge, GN7.2XLARGE32, pi2.2xlarge.4."""
    name = str(instance_type or "")
    if provider == "aliyun":
        name = name[4:] if name.startswith("ecs.") else name
        # ecs.gn7i-c8g1.2xlarge and ecs.gn8is-2x.8xlarge put a size part
        # after a dash; bare-metal families (ecs.ebmgn7ex.32xlarge) do not.
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


def entries(provider):
    """Every (instance type, gpu) the catalogue lists by name for
    ``provider``; families with a size rule list none by name."""
    for family_name, family in sorted(CATALOGUE[provider].items()):
        for size in sorted(family.sizes):
            if provider == "aliyun":
                name = "ecs.%s.%s" % (family_name, size)
            else:
                name = "%s.%s" % (family_name, size)
            yield name, lookup(provider, name)
