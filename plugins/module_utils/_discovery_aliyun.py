# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Alibaba Cloud ECS discovery through the official SDK (alibabacloud_ecs20140526).

Private to gpufleet.cloud; see _discovery.py for the shared flow.

- Instances: DescribeInstances, NextToken paging, 100 a page.
- GPU data: the instance's own GPUSpec and GPUAmount; DescribeInstanceTypes
  (10 types a call) adds the memory of one GPU (GPUMemorySize, GiB) and the
  eRDMA interface count (EriQuantity). A vGPU type says its slice in
  GPUSpec ("NVIDIA A10 * 1/6"), while the SDK types GPUAmount as a whole
  number: the count is the slice times GPUAmount (at least one).
- RDMA: an instance with RDMA addresses (RdmaIpAddress: the SCC and
  ebmgn*ex families, RoCE) is "roce"; a type with eRDMA interfaces is
  "erdma"; one whose type could not be looked up is "unknown"; otherwise
  "none".
- Throttling: error codes starting with "Throttling", and the SDK's own
  ThrottlingException (HTTP 429 with a retry hint).
"""

from __future__ import annotations

import logging

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import Adapter, require, split_endpoint
from ansible_collections.gpufleet.cloud.plugins.module_utils._pagination import by_token

try:
    from alibabacloud_credentials.client import Client as CredentialClient
    from alibabacloud_credentials.models import Config as CredentialConfig
    from alibabacloud_ecs20140526 import models as ecs_models
    from alibabacloud_ecs20140526.client import Client as EcsClient
    from alibabacloud_tea_openapi import utils_models as openapi_models
    HAS_SDK, IMPORT_ERROR = True, None
except ImportError as exc:
    HAS_SDK, IMPORT_ERROR = False, exc

LIBRARY = "alibabacloud_ecs20140526"
PAGE_SIZE = 100
TYPES_PER_CALL = 10
# DescribeRegions is answered by any region's endpoint; this one exists in
# every account.
HOME_REGION = "cn-hangzhou"

_CHARGE = {"PrePaid": "subscription", "PostPaid": "on_demand"}
# Error codes with which ECS refuses the credentials themselves (an unknown
# or disabled AccessKey, a bad signature, an invalid STS token).
AUTH_CODES = frozenset((
    "InvalidAccessKeyId.NotFound",
    "InvalidAccessKeyId.Inactive",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "InvalidSecurityToken.Expired",
    "InvalidSecurityToken.Malformed",
    "InvalidSecurityToken.MismatchWithAccessKey",
))
# The credentials SDK's logger: it has a stream handler of its own, and logs
# each provider of its chain that finds nothing, with a traceback.
SDK_CREDENTIAL_LOGGER = "credentials"


class AliyunAdapter(Adapter):
    provider = "aliyun"
    region_example = "cn-hangzhou"
    library = LIBRARY
    list_action = "DescribeInstances"
    import_error = IMPORT_ERROR
    cloud_name = "Alibaba Cloud"
    key_options = ("access_key_id", "access_key_secret")
    key_env = ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET")
    other_sources = "a profile (~/.aliyun/config.json, ALIBABA_CLOUD_PROFILE), or the ECS RAM role"
    auth_error_codes = AUTH_CODES
    #: The SDK credential object check_credentials resolved.
    _credential = None

    def __init__(self, settings):
        super().__init__(settings)
        # On a machine without credentials the chain's providers each log
        # their failure, tracebacks included, before the chain raises: 70
        # lines for one missing key. The chain's failure reaches the user as
        # one message naming what to set (and its detail with -vvv), so the
        # SDK's own log says nothing new.
        logging.getLogger(SDK_CREDENTIAL_LOGGER).setLevel(logging.CRITICAL)

    def check_credentials(self):
        key, secret = self.key_pair("access_key_id", "access_key_secret")
        if key:
            token = self.settings.credentials.get("security_token")
            client = CredentialClient(CredentialConfig(
                type="sts" if token else "access_key",
                access_key_id=key,
                access_key_secret=secret,
                security_token=token,
            ))
        else:
            # The SDK's default chain: environment, ~/.aliyun/config.json,
            # ~/.alibabacloud/credentials.ini, the ECS RAM role.
            client = CredentialClient()
        try:
            found = client.get_credential()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: each provider of the chain raises its own kind.
            raise self.missing_credentials(exc) from exc
        self.resolved_secrets = [found.access_key_secret, found.security_token]
        self._credential = client

    def client(self, region):
        ms = int(self.settings.timeout * 1000)
        config = openapi_models.Config(credential=self._credential, region_id=region,
                                       read_timeout=ms, connect_timeout=ms)
        endpoint = self.endpoint_for(region)
        if endpoint:
            config.protocol, config.endpoint = split_endpoint(endpoint)
        return EcsClient(config)

    def list_regions(self):
        client = self.client(HOME_REGION)
        body = self.call(client.describe_regions, ecs_models.DescribeRegionsRequest()).body
        return [r.region_id for r in (body.regions.region if body.regions else None) or () if r.region_id]

    def pages(self, client, region):
        def fetch(token):
            request = ecs_models.DescribeInstancesRequest(
                region_id=region, max_results=self.settings.page_size or PAGE_SIZE, next_token=token)
            body = self.call(client.describe_instances, request).body
            instances = require(body.instances, "DescribeInstances", "Instances")
            return instances.instance, body.next_token
        return by_token(fetch)

    def instance_type_of(self, raw):
        # Only GPU instances need the type's GPU memory and eRDMA count, and
        # instances whose GPUAmount is missing its GPU data.
        wanted = raw.gpuamount is None or gr.gpu_count(raw.gpuamount) or gr.slice_of(raw.gpuspec)
        return raw.instance_type if wanted else None

    def lookup_types(self, client, region, names):
        found = {}
        for start in range(0, len(names), TYPES_PER_CALL):
            request = ecs_models.DescribeInstanceTypesRequest(instance_types=names[start:start + TYPES_PER_CALL])
            body = self.call(client.describe_instance_types, request).body
            for item in (body.instance_types.instance_type if body.instance_types else None) or ():
                found[item.instance_type_id] = {
                    "model": item.gpuspec,
                    "count": gpus(item.gpuspec, item.gpuamount),
                    "memory_mib": gr.mib(item.gpumemory_size, "GiB"),
                    "erdma": bool(item.eri_quantity),
                }
        return found

    def record(self, region, raw, type_info):
        return record_from_instance(region, raw, type_info)

    def is_throttled(self, exc):
        code = str(getattr(exc, "code", "") or "")
        return code.startswith("Throttling") or type(exc).__name__ == "ThrottlingException"


def gpus(spec, amount):
    """The GPUs a GPUSpec and GPUAmount say: GPUAmount, or for a vGPU type
    ("NVIDIA A10 * 1/6") its slice times GPUAmount, at least one slice
    (a GPUAmount of 0 or none beside a slice is the SDK's integer, not
    "no GPU"). None when neither says."""
    share = gr.slice_of(spec)
    if share is None:
        return amount
    return round(share * max(gr.gpu_count(amount), 1), 4)


def record_from_instance(region, inst, type_info=None):
    """A record from one DescribeInstances instance model; ``type_info``
    None: the type could not be looked up."""
    looked_up = type_info is not None
    type_info = type_info or {}
    vpc = inst.vpc_attributes
    private_ip = gr.first(vpc.private_ip_address.ip_address if vpc and vpc.private_ip_address else None)
    if not private_ip and inst.inner_ip_address:
        # Classic network instances keep their private address here.
        private_ip = gr.first(inst.inner_ip_address.ip_address)
    public_ip = gr.first(inst.public_ip_address.ip_address if inst.public_ip_address else None)
    if not public_ip and inst.eip_address:
        public_ip = inst.eip_address.ip_address
    if inst.spot_strategy and inst.spot_strategy != "NoSpot":
        charge = "spot"
    else:
        charge = _CHARGE.get(inst.instance_charge_type, "unknown")
    if inst.rdma_ip_address and gr.first(inst.rdma_ip_address.ip_address):
        rdma = "roce"
    elif not looked_up:
        # eRDMA is the type's; without the type, not known.
        rdma = "unknown"
    elif type_info.get("erdma"):
        rdma = "erdma"
    else:
        rdma = "none"
    tags = {t.tag_key: t.tag_value or "" for t in (inst.tags.tag if inst.tags else None) or () if t.tag_key}
    # GPUAmount missing or null is GPU data missing: the type's, if its
    # lookup had them, else unknown (never 0, which is "no GPU").
    gpu_source = "api"
    spec = inst.gpuspec or type_info.get("model")
    count = gpus(spec, inst.gpuamount)
    if count is not None:
        gpu = gr.gpu_info(spec, count, type_info.get("memory_mib"))
    elif type_info.get("count") is not None:
        gpu = gr.gpu_info(type_info.get("model"), type_info["count"], type_info.get("memory_mib"))
    else:
        gpu, gpu_source = gr.unknown_gpu(), "unknown"
    return gr.make_record(
        "aliyun",
        region,
        inst.instance_id,
        zone=inst.zone_id,
        instance_type=inst.instance_type,
        name=inst.instance_name,
        state=gr.normalize_state("aliyun", inst.status),
        private_ip=private_ip,
        public_ip=public_ip,
        gpu=gpu,
        gpu_source=gpu_source,
        charge_type=charge,
        tags=tags,
        rdma=rdma,
    )
