# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: huawei_ecs
short_description: GPU instances on Huawei Cloud ECS, with GPU, spot and RDMA data
version_added: 0.1.0
author: gpufleet developers (@gpufleet)
description:
  - Lists ECS servers of several regions in parallel through the official SDK
    (huaweicloudsdkecs), with the GPU model, count and memory (the flavor's GPUs and
    ListFlavors), spot and charge type, and RDMA (IB or RoCE flavors), as the same
    C(gpufleet_*) variables the other gpufleet.cloud inventory plugins give.
  - Regions are IAM projects; with O(regions) empty they are discovered through IAM
    (huaweicloudsdkiam), and each region's project ID is looked up by the SDK.
  - The configuration file name must end with C(huawei_ecs.yml) or C(huawei_ecs.yaml).
notes:
  - "Charge type, from the server's C(metadata.charging_mode): C(0) is C(on_demand), C(1) C(subscription),
    C(2) C(spot); any other value, or none, is C(unknown), named in a warning."
  - "GPU shapes: the server's C(flavor.gpus), else the flavor's C(info:gpus), PCI alias or
    C(pci_passthrough:gpu_specs). A vGPU flavor's C(gpu_specs) name a profile (C(m60_1q:virt:1), 1 GiB of
    an M60's 8): C(gpufleet_gpu.count) is its share of one GPU (C(0.125)), in the group C(gpu_share), and
    C(unknown) where the board's frame buffer is not in the catalogue (M60, T4 and A10 are)."
requirements:
  - huaweicloudsdkecs
  - huaweicloudsdkiam
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
    choices: [gpufleet.cloud.huawei_ecs]
  endpoint:
    description:
      - ECS endpoint URL instead of V(https://ecs.{region}.myhuaweicloud.com), for private
        gateways and emulators. V({region}) in it is replaced by each region's name.
    type: str
    env:
      - name: GPUFLEET_HUAWEI_ENDPOINT
  iam_endpoint:
    description:
      - IAM endpoint URL, used to discover regions and each region's project ID.
      - Unset, the SDK's default IAM endpoint.
    type: str
    env:
      - name: HUAWEICLOUD_SDK_IAM_ENDPOINT
  access_key:
    description:
      - Access key (AK). Unset, the SDK's own chain applies - C(HUAWEICLOUD_SDK_AK) and
        C(HUAWEICLOUD_SDK_SK), the profile C(~/.huaweicloud/credentials), the ECS agency.
    type: str
  secret_key:
    description: Secret key (SK), with O(access_key).
    type: str
  security_token:
    description: Security token for temporary credentials.
    type: str
"""

EXAMPLES = r"""
# huawei_ecs.yml: running GPU servers of two regions
plugin: gpufleet.cloud.huawei_ecs
regions: [cn-north-4, cn-east-3]
filters:
  state: [running]
---
# InfiniBand servers in a group of their own
plugin: gpufleet.cloud.huawei_ecs
regions: [cn-north-4]
groups:
  infiniband: gpufleet_rdma == 'ib'
"""

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._gpu_inventory import GpuInventoryBase


class InventoryModule(GpuInventoryBase):
    NAME = "gpufleet.cloud.huawei_ecs"
    CREDENTIAL_OPTIONS = ("access_key", "secret_key", "security_token")
    EXTRA_OPTIONS = ("iam_endpoint",)

    def adapter_class(self):
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_huawei import HuaweiAdapter

        return HuaweiAdapter
