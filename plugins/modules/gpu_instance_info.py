#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_instance_info
short_description: List GPU instances on Alibaba Cloud, Tencent Cloud, Huawei Cloud or AWS
version_added: 0.1.0
author: gpufleet developers (@gpufleet)
description:
  - Lists the instances of one cloud, in several regions at once, as the same normalised
    records the gpufleet.cloud inventory plugins turn into hosts - GPU model, count and
    memory, spot and charge type, RDMA, addresses, state and tags.
  - Uses each cloud's official SDK and its credential chain (environment, profile, instance
    role) for anything not given here.
  - Regions are queried in parallel; a region that fails is reported in RV(failed_regions) with
    a warning, unless O(strict_regions) is set.
requirements:
  - alibabacloud_ecs20140526 (provider aliyun)
  - tencentcloud-sdk-python-cvm (provider tencent)
  - huaweicloudsdkecs and huaweicloudsdkiam (provider huawei)
  - boto3 (provider aws)
attributes:
  check_mode:
    description: Can run in check mode and return the same result; it never changes anything.
    support: full
  diff_mode:
    description: Nothing changes, so there is no diff.
    support: none
extends_documentation_fragment:
  - gpufleet.cloud.gpu_inventory.gpu_filter
options:
  provider:
    description: The cloud to list.
    type: str
    required: true
    choices: [aliyun, tencent, huawei, aws]
  regions:
    description:
      - Regions to list. Empty means every region the account can use.
    type: list
    elements: str
    default: []
  endpoint:
    description:
      - API endpoint URL instead of the public one (private gateways, emulators).
        V({region}) is replaced by each region's name.
    type: str
  iam_endpoint:
    description: IAM endpoint URL (O(provider=huawei) only), for region and project discovery.
    type: str
  access_key:
    description:
      - Access key ID (AWS), AccessKey ID (Alibaba Cloud), SecretId (Tencent Cloud) or AK (Huawei
        Cloud). Unset, the SDK's credential chain applies.
    type: str
    aliases: [access_key_id, secret_id]
  secret_key:
    description: The secret that goes with O(access_key).
    type: str
    aliases: [access_key_secret]
  security_token:
    description: A token for temporary credentials.
    type: str
    aliases: [session_token, token]
  profile:
    description: A profile of the shared AWS config files (O(provider=aws) only).
    type: str
  workers:
    description: The most regions queried at the same time.
    type: int
    default: 16
  timeout:
    description: Seconds each API call may take before it fails.
    type: float
    default: 30
  retries:
    description: How many times a throttled call is retried, with jittered backoff.
    type: int
    default: 4
  strict_regions:
    description:
      - Fail when any region fails, instead of warning and listing the others.
      - Fail too when a region's total count (Tencent's C(TotalCount), Huawei's C(count)) is
        lower than the instances its pages held, which is otherwise a warning with every
        instance kept.
    type: bool
    default: false
  filters:
    description: Which instances to return; the same filters as the inventory plugins.
    type: dict
    default: {}
    suboptions:
      state:
        description:
          - Normalised states to keep. Without it, every state but V(terminating) and
            V(terminated).
        type: list
        elements: str
        choices: [pending, running, stopping, stopped, rebooting, terminating, terminated, error, unknown]
      tags:
        description: Tags an instance must carry (a value may be a list, or null for any value).
        type: dict
"""

EXAMPLES = r"""
- name: Running H100 and H200 instances of two AWS regions
  gpufleet.cloud.gpu_instance_info:
    provider: aws
    regions: [us-east-1, us-west-2]
    filters:
      state: [running]
  delegate_to: localhost
  register: fleet

- name: Their addresses
  ansible.builtin.debug:
    msg: "{{ fleet.instances | selectattr('gpu.model', 'in', ['H100', 'H200']) | map(attribute='private_ip') }}"

- name: Every Alibaba Cloud GPU instance, credentials from the environment
  gpufleet.cloud.gpu_instance_info:
    provider: aliyun
  delegate_to: localhost
"""

RETURN = r"""
instances:
  description: One record per instance, sorted by region and instance ID.
  returned: always
  type: list
  elements: dict
  contains:
    provider:
      description: V(aliyun), V(tencent), V(huawei) or V(aws).
      type: str
    region:
      description: The region.
      type: str
    zone:
      description: The availability zone.
      type: str
    instance_id:
      description: The cloud's instance ID.
      type: str
    instance_type:
      description: The instance type (flavor).
      type: str
    name:
      description: The instance name (the Name tag on AWS).
      type: str
    state:
      description: Normalised state, V(running), V(stopped) and so on.
      type: str
    private_ip:
      description: The primary private IPv4 address.
      type: str
    public_ip:
      description: The public IPv4 address, if any.
      type: str
    gpu:
      description:
        - V(model) (normalised, like V(A100)), V(count) and V(memory_mib) of one GPU.
        - V(model) and V(count) are null when the GPU data is unknown (see RV(instances[].gpu_source)); a count
          of 0 means the instance type has no GPU.
        - A share of a GPU (a vGPU slice, an EC2 partition) is a float count below 1 (V(0.25)), never rounded;
          docs/inventory.md has what each cloud's API says and what it becomes.
      type: dict
    gpu_source:
      description: >-
        Where the GPU data came from - V(api); V(catalogue), the built-in catalogue of GPU instance families,
        when the API gave none for the instance; V(unknown) when neither has it.
      type: str
    spot:
      description: Whether this is a spot (preemptible) instance.
      type: bool
    charge_type:
      description:
        - V(on_demand), V(subscription), V(spot), V(dedicated_host) or V(unknown).
        - Each cloud's mapping is in the notes of its inventory plugin (C(ansible-doc -t inventory)); a value
          none maps is V(unknown), and a warning names the instance.
      type: str
    tags:
      description: The instance's tags.
      type: dict
    rdma:
      description: V(efa), V(erdma), V(roce), V(ib), V(none), or V(unknown) when the instance type, which says it,
        could not be looked up.
      type: str
  sample:
    - provider: aws
      region: us-east-1
      zone: us-east-1a
      instance_id: i-0123456789abcdef0
      instance_type: p5.48xlarge
      name: trainer-1
      state: running
      private_ip: 10.0.1.15
      public_ip: null
      gpu: {model: H100, count: 8, memory_mib: 81920}
      gpu_source: api
      spot: false
      charge_type: on_demand
      tags: {Name: trainer-1}
      rdma: efa
failed_regions:
  description: The regions that could not be listed, and why.
  returned: always
  type: list
  elements: dict
  sample:
    - region: eu-west-1
      error: "ClientError: An error occurred (Unavailable) when calling the DescribeInstances operation"
regions:
  description: The regions that were queried (discovered when O(regions) was empty).
  returned: always
  type: list
  elements: str
  sample: [us-east-1, us-west-2]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._clouds import CLOUDS
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import (
    ConfigError,
    DiscoveryError,
    MissingLibraryError,
    Settings,
    discover,
)

# The module's credential options, under each adapter's own names.
CREDENTIAL_NAMES = {
    "aliyun": {"access_key": "access_key_id", "secret_key": "access_key_secret", "security_token": "security_token"},
    "tencent": {"access_key": "secret_id", "secret_key": "secret_key", "security_token": "token"},
    "huawei": {"access_key": "access_key", "secret_key": "secret_key", "security_token": "security_token"},
    "aws": {"access_key": "access_key", "secret_key": "secret_key", "security_token": "session_token",
            "profile": "profile"},
}


def adapter_class(provider):
    # Imported on demand: one call needs one cloud's SDK, not all four.
    if provider == "aliyun":
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aliyun import AliyunAdapter as adapter
    elif provider == "tencent":
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_tencent import TencentAdapter as adapter
    elif provider == "huawei":
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_huawei import HuaweiAdapter as adapter
    else:
        from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery_aws import AwsAdapter as adapter
    return adapter


def main():
    module = AnsibleModule(
        argument_spec=dict(
            provider=dict(type="str", required=True, choices=list(CLOUDS)),
            regions=dict(type="list", elements="str", default=[]),
            endpoint=dict(type="str"),
            iam_endpoint=dict(type="str"),
            access_key=dict(type="str", aliases=["access_key_id", "secret_id"], no_log=True),
            secret_key=dict(type="str", aliases=["access_key_secret"], no_log=True),
            security_token=dict(type="str", aliases=["session_token", "token"], no_log=True),
            profile=dict(type="str"),
            workers=dict(type="int", default=16),
            timeout=dict(type="float", default=30),
            retries=dict(type="int", default=4),
            strict_regions=dict(type="bool", default=False),
            gpu_only=dict(type="bool", default=True),
            gpu_unknown=dict(type="bool", default=True),
            filters=dict(
                type="dict",
                default={},
                options=dict(
                    state=dict(type="list", elements="str", choices=list(gr.STATES)),
                    tags=dict(type="dict"),
                ),
            ),
        ),
        required_together=[("access_key", "secret_key")],
        supports_check_mode=True,
    )
    params = module.params
    provider = params["provider"]
    for option, minimum in (("workers", 1), ("retries", 0), ("timeout", 0.001)):
        if params[option] < minimum:
            module.fail_json(msg="option '%s': must be at least %s, got %s" % (option, minimum, params[option]))
    if params["profile"] and provider != "aws":
        module.fail_json(msg="option 'profile': only for provider aws")
    if params["iam_endpoint"] and provider != "huawei":
        module.fail_json(msg="option 'iam_endpoint': only for provider huawei")

    names = CREDENTIAL_NAMES[provider]
    settings = Settings(
        endpoint=params["endpoint"],
        timeout=params["timeout"],
        retries=params["retries"],
        credentials={names[option]: params[option] for option in names},
        extra={"iam_endpoint": params["iam_endpoint"]},
    )
    try:
        result = discover(adapter_class(provider)(settings), params["regions"], params["workers"])
    except MissingLibraryError as exc:
        module.fail_json(msg=missing_required_lib(exc.library), exception=str(exc.import_error))
    except ConfigError as exc:
        # Options named after the adapter's credential names map back to ours.
        option = {v: k for k, v in names.items()}.get(exc.option, exc.option)
        module.fail_json(msg=str(exc).replace("'%s'" % exc.option, "'%s'" % option, 1))
    except DiscoveryError as exc:
        module.fail_json(msg=str(exc))

    for warning in result.warnings:
        message = "region %s: %s" % (warning.region, warning.message)
        if warning.strict and params["strict_regions"]:
            module.fail_json(msg=message + " (strict_regions is on)")
        module.warn(message)
    failed = [{"region": f.region, "error": f.error} for f in result.failures]
    for failure in failed:
        message = "region %s failed: %s" % (failure["region"], failure["error"])
        if params["strict_regions"]:
            module.fail_json(msg=message + " (strict_regions is on)", failed_regions=failed)
        module.warn(message)
    filters = params["filters"] or {}
    states = tuple(filters["state"]) if filters.get("state") else None
    instances = []
    for record in result.records:
        if gr.matches(record, states, filters.get("tags") or {}, params["gpu_only"], params["gpu_unknown"]):
            instances.append(record)
        elif params["gpu_only"] and not params["gpu_unknown"] and gr.gpu_unknown(record):
            module.warn("instance %s in %s is left out: its GPU data is unknown and gpu_unknown is false"
                        % (record["instance_id"], record["region"]))
    module.exit_json(changed=False, instances=instances, failed_regions=failed, regions=result.regions)


if __name__ == "__main__":
    main()
