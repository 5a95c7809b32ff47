# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tencent Cloud CVM discovery through the official SDK (tencentcloud-sdk-python-cvm).

Private to gpufleet.cloud; see _discovery.py for the shared flow.

- Instances: DescribeInstances, Offset/Limit paging, 100 a page.
- GPU data: the instance's GPUInfo (type and count); DescribeInstanceTypeConfigs
  adds the memory of one GPU (GpuMemory, GiB). That API allows one value a
  filter, so types are looked up one instance family (GN7, HCCPNV4h...) a
  call: a family is the part of a type name before the dot.
- RDMA: an instance with RDMA addresses, or of an HCC (high-performance
  computing cluster) family, is on Tencent's RoCE network: "roce".
- Throttling: error codes starting with "RequestLimitExceeded".
"""

from __future__ import annotations

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue, _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import Adapter, require, split_endpoint
from ansible_collections.gpufleet.cloud.plugins.module_utils._pagination import by_offset

try:
    from tencentcloud.common.credential import Credential, DefaultCredentialProvider
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
    from tencentcloud.cvm.v20170312 import cvm_client, models as cvm_models
    HAS_SDK, IMPORT_ERROR = True, None
except ImportError as exc:
    HAS_SDK, IMPORT_ERROR = False, exc

LIBRARY = "tencentcloud-sdk-python-cvm"
PAGE_SIZE = 100
# DescribeRegions is answered in any region; this one exists in every account.
HOME_REGION = "ap-guangzhou"

# Error codes with which CVM refuses the credentials themselves. Not
# AuthFailure.UnauthorizedOperation: that is a permission the key lacks.
AUTH_CODES = frozenset((
    "AuthFailure.SecretIdNotFound",
    "AuthFailure.SignatureFailure",
    "AuthFailure.InvalidSecretId",
    "AuthFailure.InvalidAuthorization",
    "AuthFailure.TokenFailure",
))
_CHARGE = {
    "PREPAID": "subscription",
    "POSTPAID_BY_HOUR": "on_demand",
    "SPOTPAID": "spot",
    "CDHPAID": "dedicated_host",
    "CDCPAID": "dedicated_host",
}


def family_of(instance_type):
    """The instance family of a CVM type name: GN7.2XLARGE32 -> GN7."""
    return (instance_type or "").split(".", 1)[0]


class TencentAdapter(Adapter):
    provider = "tencent"
    region_example = "ap-guangzhou"
    library = LIBRARY
    list_action = "DescribeInstances"
    import_error = IMPORT_ERROR
    cloud_name = "Tencent Cloud"
    key_options = ("secret_id", "secret_key")
    key_env = ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY")
    other_sources = "a profile (~/.tencentcloud/credentials), or the CVM role"
    auth_error_codes = AUTH_CODES
    #: The SDK credential object check_credentials resolved.
    _credential = None

    def check_credentials(self):
        secret_id, secret_key = self.key_pair("secret_id", "secret_key")
        if secret_id:
            self._credential = Credential(secret_id, secret_key, self.settings.credentials.get("token"))
            return
        try:
            # The SDK's default chain: TENCENTCLOUD_SECRET_ID/KEY, the
            # ~/.tencentcloud/credentials profile, the CVM role, TKE OIDC.
            self._credential = DefaultCredentialProvider().get_credentials()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: the chain's providers fail in their own ways.
            raise self.missing_credentials(exc) from exc
        self.resolved_secrets = [getattr(self._credential, "secret_key", None), getattr(self._credential, "token", None)]

    def client(self, region):
        http = HttpProfile(reqTimeout=self.settings.timeout)
        endpoint = self.endpoint_for(region)
        if endpoint:
            http.scheme, http.endpoint = split_endpoint(endpoint)
            http.protocol = http.scheme
        # English messages, so warnings read the same on every cloud.
        return cvm_client.CvmClient(self._credential, region, ClientProfile(httpProfile=http, language="en-US"))

    def list_regions(self):
        response = self.call(self.client(HOME_REGION).DescribeRegions, cvm_models.DescribeRegionsRequest())
        return [r.Region for r in response.RegionSet or () if r.Region and r.RegionState in (None, "AVAILABLE")]

    def pages(self, client, region):
        def fetch(offset, limit):
            request = cvm_models.DescribeInstancesRequest()
            request.Offset = offset
            request.Limit = limit
            response = self.call(client.DescribeInstances, request)
            return require(response.InstanceSet, "DescribeInstances", "InstanceSet"), \
                require(response.TotalCount, "DescribeInstances", "TotalCount")
        return by_offset(fetch, self.settings.page_size or PAGE_SIZE, warn=self.count_warning(region))

    def instance_type_of(self, raw):
        # GPUInfo is only returned for GPU instances; only those need the
        # type's GPU memory. An instance whose GPUInfo lacks its count, or
        # of a GPU type (by the catalogue) without GPUInfo, has its GPU
        # data missing: the type's lookup may still have it.
        return raw.InstanceType if _gpu_expected(raw) else None

    def lookup_types(self, client, region, names):
        found = {}
        wanted = set(names)
        for family in sorted({family_of(n) for n in names}):
            request = cvm_models.DescribeInstanceTypeConfigsRequest()
            family_filter = cvm_models.Filter()
            family_filter.Name = "instance-family"
            family_filter.Values = [family]
            request.Filters = [family_filter]
            response = self.call(client.DescribeInstanceTypeConfigs, request)
            # One entry per zone the type is sold in; the GPU facts agree.
            for item in response.InstanceTypeConfigSet or ():
                if item.InstanceType in wanted:
                    found[item.InstanceType] = {
                        "model": item.GpuType,
                        "count": item.GpuCount,
                        "memory_mib": gr.mib(item.GpuMemory, "GiB"),
                    }
        return found

    def record(self, region, raw, type_info):
        return record_from_instance(region, raw, type_info)

    def is_throttled(self, exc):
        return str(getattr(exc, "code", "") or "").startswith("RequestLimitExceeded")


def _gpu_expected(inst):
    """Whether ``inst`` has GPUs by what it says (a GPUInfo, whatever its
    count) or, when it says nothing, by the catalogue's word on its type."""
    if inst.GPUInfo is not None:
        return inst.GPUInfo.GPUCount is None or bool(gr.gpu_count(inst.GPUInfo.GPUCount))
    return _gpu_catalogue.lookup("tencent", inst.InstanceType) is not None


def record_from_instance(region, inst, type_info=None):
    """A record from one DescribeInstances Instance model."""
    type_info = type_info or {}
    gpu = inst.GPUInfo
    count = gpu.GPUCount if gpu else None
    gpu_source = "api"
    if count is not None:
        # As reported: 0.25 is a quarter of a GPU (vGPU), kept as the float.
        gpu_data = gr.gpu_info(gpu.GPUType or type_info.get("model"), count, type_info.get("memory_mib"))
    elif type_info.get("count") is not None:
        gpu_data = gr.gpu_info(type_info.get("model"), type_info["count"], type_info.get("memory_mib"))
    elif _gpu_expected(inst):
        gpu_data, gpu_source = gr.unknown_gpu(), "unknown"
    else:
        # No GPUInfo, and not a GPU type: CVM's way of saying "no GPU".
        gpu_data = gr.gpu_info()
    if inst.RdmaIpAddresses or family_of(inst.InstanceType).upper().startswith("HCC"):
        rdma = "roce"
    else:
        rdma = "none"
    return gr.make_record(
        "tencent",
        region,
        inst.InstanceId,
        zone=inst.Placement.Zone if inst.Placement else None,
        instance_type=inst.InstanceType,
        name=inst.InstanceName,
        state=gr.normalize_state("tencent", inst.InstanceState),
        private_ip=gr.first(inst.PrivateIpAddresses),
        public_ip=gr.first(inst.PublicIpAddresses),
        gpu=gpu_data,
        gpu_source=gpu_source,
        charge_type=_CHARGE.get(inst.InstanceChargeType, "unknown"),
        tags={t.Key: t.Value or "" for t in inst.Tags or () if t.Key},
        rdma=rdma,
    )
