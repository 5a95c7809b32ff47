# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: tencent_cvm
short_description: GPU instances on Tencent Cloud CVM, with GPU, spot and RDMA data
version_added: 0.1.0
author: gpufleet developers (@gpufleet)
description:
  - Lists CVM instances of several regions in parallel through the official SDK
    (tencentcloud-sdk-python-cvm), with the GPU model, count and memory (GPUInfo and
    DescribeInstanceTypeConfigs), spot and charge type, and RDMA (RoCE on HCC instances), as
    the same C(gpufleet_*) variables the other gpufleet.cloud inventory plugins give.
  - The configuration file name must end with C(tencent_cvm.yml) or C(tencent_cvm.yaml).
notes:
  - "Charge type, from C(InstanceChargeType): C(PREPAID) is C(subscription), C(POSTPAID_BY_HOUR)
    C(on_demand), C(SPOTPAID) C(spot), C(CDHPAID) and C(CDCPAID) C(dedicated_host); any other value is
    C(unknown), named in a warning."
  - "GPU shapes: C(GPUInfo.GPUCount) as Tencent gives it, a fraction for a vGPU slice (C(0.25) of an A10),
    in the group C(gpu_share); a null C(GPUCount) is GPU data missing: the type config's, the catalogue's,
    or C(unknown)."
requirements:
  - tencentcloud-sdk-python-cvm
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
    choices: [gpufleet.cloud.tencent_cvm]
  endpoint:
    description:
      - CVM endpoint (V(https://host[:port]) or a host name) instead of
        C(cvm.tencentcloudapi.com), for private gateways and emulators. V({region}) in it is
        replaced by each region's name.
    type: str
    env:
      - name: GPUFLEET_TENCENT_ENDPOINT
  secret_id:
    description:
      - SecretId. Unset, the SDK's own chain applies - C(TENCENTCLOUD_SECRET_ID) and
        C(TENCENTCLOUD_SECRET_KEY), the profile C(~/.tencentcloud/credentials), the CVM role,
        TKE OIDC.
    type: str
  secret_key:
    description: SecretKey, with O(secret_id).
    type: str
  token:
    description: STS token for temporary credentials.
    type: str
"""

EXAMPLES = r"""
# tencent_cvm.yml: running GPU instances of two regions
plugin: gpufleet.cloud.tencent_cvm
regions: [ap-guangzhou, ap-shanghai]
filters:
  state: [running]
---
# Every region, spot instances excluded by a composed group
plugin: gpufleet.cloud.tencent_cvm
groups:
  steady: not gpufleet_spot
"""

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._gpu_inventory import GpuInventoryBase


class InventoryModule(GpuInventoryBase):
    NAME = "gpufleet.cloud.tencent_cvm"
    CREDENTIAL_OPTIONS = ("secret_id", "secret_key", "token")

    def adapter_class(self):
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_tencent import TencentAdapter

        return TencentAdapter
