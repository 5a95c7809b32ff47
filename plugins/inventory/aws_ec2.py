# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: aws_ec2
short_description: GPU instances on AWS EC2, with GPU, spot and EFA data
version_added: 0.1.0
author: gpufleet developers (@gpufleet)
description:
  - Lists EC2 instances of several regions in parallel through boto3 and adds what
    C(amazon.aws.aws_ec2) does not - the GPU model, count and memory (from DescribeInstanceTypes),
    spot and charge type, and EFA - as the same C(gpufleet_*) variables the other gpufleet.cloud
    inventory plugins give.
  - The configuration file name must end with C(aws_ec2.yml) or C(aws_ec2.yaml).
notes:
  - "Charge type, from C(InstanceLifecycle): C(spot) and C(interruptible-capacity-reservation) (reclaimed
    with the same 2-minute notice) are C(spot); C(capacity-block) and C(scheduled) are C(subscription); none
    is C(on_demand), or C(dedicated_host) on C(host) tenancy; any other lifecycle is C(unknown), named in a
    warning."
  - "GPU shapes: the type's C(GpuInfo) C(Count) whole GPUs. A partitioned type (g6f, gr6f: C(Count) 0,
    C(GpuPartitionSize) below 1) is C(LogicalGpuCount) times the partition (C(0.125) of an L4), in the
    group C(gpu_share); a partition without C(LogicalGpuCount), or C(GpuInfo) without counts, is C(unknown)."
requirements:
  - boto3
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
    choices: [gpufleet.cloud.aws_ec2]
  endpoint:
    description:
      - EC2 endpoint URL instead of the region's public one, for VPC endpoints, private
        gateways and emulators. V({region}) in it is replaced by each region's name.
      - Unset, boto3 also honours C(AWS_ENDPOINT_URL_EC2) and C(AWS_ENDPOINT_URL).
    type: str
    env:
      - name: GPUFLEET_AWS_ENDPOINT
  access_key:
    description:
      - AWS access key ID. Unset, boto3's own chain applies - environment, shared config and
        credentials files, SSO, the instance role.
    type: str
  secret_key:
    description: AWS secret access key, with O(access_key).
    type: str
  session_token:
    description: AWS session token for temporary credentials.
    type: str
  profile:
    description: A profile of the shared AWS config files. Unset, boto3 honours C(AWS_PROFILE).
    type: str
"""

EXAMPLES = r"""
# aws_ec2.yml: running GPU instances of two regions, named by private address
plugin: gpufleet.cloud.aws_ec2
regions: [us-east-1, us-west-2]
filters:
  state: [running]
  tags:
    team: ml
---
# Every region of the account, named after the Name tag, grouped by instance type,
# cached for an hour
plugin: gpufleet.cloud.aws_ec2
hostnames: ["tag:Name", private_ip, instance_id]
keyed_groups:
  - key: gpufleet_instance_type
    prefix: type
compose:
  ansible_host: gpufleet_private_ip
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/gpufleet-inventory
cache_timeout: 3600
"""

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._gpu_inventory import GpuInventoryBase


class InventoryModule(GpuInventoryBase):
    NAME = "gpufleet.cloud.aws_ec2"
    CREDENTIAL_OPTIONS = ("access_key", "secret_key", "session_token", "profile")

    def adapter_class(self):
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aws import AwsAdapter

        return AwsAdapter
