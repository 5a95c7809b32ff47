# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: aliyun_ecs
short_description: GPU instances on Alibaba Cloud ECS, with GPU, spot and RDMA data
version_added: 0.1.0
author: gpufleet developers (@gpufleet)
description:
  - Lists ECS instances of several regions in parallel through the official SDK
    (alibabacloud_ecs20140526), with the GPU model, count and memory (GPUSpec, GPUAmount and
    DescribeInstanceTypes), spot and charge type, and RDMA (eRDMA or RoCE), as the same
    C(gpufleet_*) variables the other gpufleet.cloud inventory plugins give.
  - The configuration file name must end with C(aliyun_ecs.yml) or C(aliyun_ecs.yaml).
notes:
  - "Charge type: C(SpotStrategy) C(SpotAsPriceGo) or C(SpotWithPriceLimit) is C(spot); otherwise
    C(InstanceChargeType) C(PrePaid) is C(subscription) and C(PostPaid) is C(on_demand); any other value is
    C(unknown), named in a warning."
  - "GPU shapes: C(GPUAmount) whole GPUs of the C(GPUSpec) model. A vGPU type says its slice in C(GPUSpec)
    (C(NVIDIA A10 * 1/6)): C(gpufleet_gpu.count) is the slice times C(GPUAmount), at least one slice
    (C(0.1667)), and the host is in the group C(gpu_share). C(GPUAmount) missing is GPU data missing:
    the type's, the catalogue's, or C(unknown)."
requirements:
  - alibabacloud_ecs20140526
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
  - gpufleet.cloud.gpu_inventory
  - gpufleet.cloud.gpu_inventory.gpu_filter
options:
  plugin:
    description: The name of this plugin.
    required: true
    type: str
    choices: [gpufleet.cloud.aliyun_ecs]
  endpoint:
    description:
      - ECS endpoint (V(https://host[:port]) or a host name) instead of the region's public
        one, for VPC endpoints, private gateways and emulators. V({region}) in it is replaced
        by each region's ID.
    type: str
    env:
      - name: GPUFLEET_ALIYUN_ENDPOINT
  access_key_id:
    description:
      - AccessKey ID. Unset, the SDK's own chain applies - C(ALIBABA_CLOUD_ACCESS_KEY_ID) and
        C(ALIBABA_CLOUD_ACCESS_KEY_SECRET), the CLI profile (C(~/.aliyun/config.json),
        C(ALIBABA_CLOUD_PROFILE)), C(~/.alibabacloud/credentials.ini), the ECS RAM role.
    type: str
  access_key_secret:
    description: AccessKey secret, with O(access_key_id).
    type: str
  security_token:
    description: STS token for temporary credentials.
    type: str
"""

EXAMPLES = r"""
# aliyun_ecs.yml: running GPU instances of two regions
plugin: gpufleet.cloud.aliyun_ecs
regions: [cn-hangzhou, cn-beijing]
filters:
  state: [running]
---
# Every region, named after the instance name, with the eRDMA hosts in a group of their own
plugin: gpufleet.cloud.aliyun_ecs
hostnames: [name, private_ip]
groups:
  erdma: gpufleet_rdma == 'erdma'
compose:
  ansible_host: gpufleet_private_ip
"""

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._gpu_inventory import GpuInventoryBase


class InventoryModule(GpuInventoryBase):
    NAME = "gpufleet.cloud.aliyun_ecs"
    CREDENTIAL_OPTIONS = ("access_key_id", "access_key_secret", "security_token")

    def adapter_class(self):
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aliyun import AliyunAdapter

        return AliyunAdapter
