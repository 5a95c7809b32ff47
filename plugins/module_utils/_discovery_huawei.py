# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Huawei Cloud ECS discovery through the official SDK (huaweicloudsdkecs).

Private to gpufleet.cloud; see _discovery.py for the shared flow.

- Regions: Huawei has no region API in ECS; a region is an IAM project, so
  IAM's KeystoneListAuthProjects (huaweicloudsdkiam) lists the account's
  regions. A region's project id is looked up by the SDK itself (IAM
  KeystoneListProjects) when its client is built.
- Instances: ListServersDetails, where ``offset`` is a page number from 1;
  1000 a page, the API's maximum.
- GPU data: the server's own flavor.gpus (name, count, memory_mb). ListFlavors
  (once a region) gives the flavor's extra specs: info:gpus or the PCI
  passthrough alias when a server's flavor carries no GPU list, and
  info:features, which names the flavor's RDMA network (IB or RoCE). A
  vGPU flavor's gpu_specs name a vGPU profile ("m60_1q:virt:1"): its
  count is the profile's share of one GPU (1/8 of an M60), unknown where
  the board's frame buffer is not in the catalogue.
- Charge type: the server's metadata charging_mode (0 pay-per-use,
  1 yearly/monthly, 2 spot).
- Throttling: HTTP 429 and the API gateway's APIGW.0308.
"""

from __future__ import annotations

import json
import logging
import os
import re

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue as cat
from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import Adapter, require
from ansible_collections.gpufleet.cloud.plugins.module_utils._pagination import by_page_number

try:
    from huaweicloudsdkcore.auth.credentials import BasicCredentials, GlobalCredentials
    from huaweicloudsdkcore.auth.provider import CredentialProviderChain
    from huaweicloudsdkcore.http.http_config import HttpConfig
    from huaweicloudsdkcore.region.region import Region
    from huaweicloudsdkecs.v2 import EcsClient, ListFlavorsRequest, ListServersDetailsRequest
    from huaweicloudsdkiam.v3 import IamClient, KeystoneListAuthProjectsRequest
    HAS_SDK, IMPORT_ERROR = True, None
except ImportError as exc:
    HAS_SDK, IMPORT_ERROR = False, exc

LIBRARY = "huaweicloudsdkecs"
PAGE_SIZE = 1000
DEFAULT_IAM_ENDPOINT = "https://iam.myhuaweicloud.com"
# The SDK reads this for its own project id lookups; region discovery does too.
IAM_ENDPOINT_ENV = "HUAWEICLOUD_SDK_IAM_ENDPOINT"
THROTTLE_CODES = frozenset(("APIGW.0308", "429"))
# The API gateway's "Incorrect IAM authentication information" (an unknown
# AK, a bad signature, an expired token), for ECS and IAM alike.
AUTH_CODES = frozenset(("APIGW.0301",))

_CHARGE = {"0": "on_demand", "1": "subscription", "2": "spot"}
# A project named like a region; sub-projects ("cn-north-4_team") and the
# internal "MOS" project are not regions.
_REGION_PROJECT = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+$")
_WORDS = re.compile(r"[a-z0-9]+")
# A vGPU profile in a flavor's gpu_specs: board, frame buffer GiB, series.
_VGPU_PROFILE = re.compile(r"^([a-z0-9]+)[_-](\d+)[a-z]$", re.IGNORECASE)


class HuaweiAdapter(Adapter):
    provider = "huawei"
    region_example = "cn-north-4"
    library = LIBRARY
    list_action = "ListServersDetails"
    import_error = IMPORT_ERROR
    cloud_name = "Huawei Cloud"
    key_options = ("access_key", "secret_key")
    key_env = ("HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK")
    other_sources = "a profile (~/.huaweicloud/credentials), or the ECS agency"
    auth_error_codes = AUTH_CODES

    def __init__(self, settings):
        super().__init__(settings)
        self._keys = None
        # The SDK logs each failed call at ERROR on loggers of its own that
        # do not propagate; with no handler, Python would print them on
        # stderr. The failure itself reaches the user as a region warning.
        for name in ("EcsClient", "IamClient"):
            logger = logging.getLogger("HuaweiCloud-SDK-" + name)
            if not logger.handlers:
                logger.addHandler(logging.NullHandler())

    def check_credentials(self):
        ak, sk = self.key_pair("access_key", "secret_key")
        if ak:
            self._keys = (ak, sk, self.settings.credentials.get("security_token"))
            return
        try:
            # The SDK's default chain: HUAWEICLOUD_SDK_AK/SK, the
            # ~/.huaweicloud/credentials profile, the ECS agency (metadata).
            found = CredentialProviderChain.get_basic_credential_provider_chain().get_credentials()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: the metadata provider can fail with plain requests errors.
            raise self.missing_credentials(exc) from exc
        # The chain's project id (if any) belongs to one region; each
        # region's client looks its own up instead.
        self._keys = (found.ak, found.sk, found.security_token)
        self.resolved_secrets = [found.sk, found.security_token]

    def _credentials(self, kind):
        # A fresh object for each client: the SDK writes the region's
        # project id (or the account's domain id) into it.
        ak, sk, token = self._keys
        credentials = kind(ak, sk).with_security_token(token)
        iam = self.settings.extra.get("iam_endpoint")
        return credentials.with_iam_endpoint(iam) if iam else credentials

    def _http_config(self):
        config = HttpConfig.get_default_config()
        config.timeout = (self.settings.timeout, self.settings.timeout)
        return config

    def client(self, region):
        endpoint = self.endpoint_for(region) or "https://ecs.%s.myhuaweicloud.com" % region
        builder = (EcsClient.new_builder()
                   .with_http_config(self._http_config())
                   .with_credentials(self._credentials(BasicCredentials))
                   .with_region(Region(region, endpoint)))
        # build() asks IAM for the region's project id: retry it like any call.
        return self.call(builder.build)

    def list_regions(self):
        iam = self.settings.extra.get("iam_endpoint") or os.environ.get(IAM_ENDPOINT_ENV) or DEFAULT_IAM_ENDPOINT
        client = (IamClient.new_builder()
                  .with_http_config(self._http_config())
                  .with_credentials(self._credentials(GlobalCredentials))
                  .with_endpoint(iam)
                  .build())
        response = self.call(client.keystone_list_auth_projects, KeystoneListAuthProjectsRequest())
        return [p.name for p in response.projects or () if p.enabled is not False and _REGION_PROJECT.match(p.name or "")]

    def pages(self, client, region):
        def fetch(page, limit):
            response = self.call(client.list_servers_details, ListServersDetailsRequest(limit=limit, offset=page))
            return require(response.servers, "ListServersDetails", "servers"), response.count
        return by_page_number(fetch, self.settings.page_size or PAGE_SIZE, warn=self.count_warning(region))

    def instance_type_of(self, raw):
        return raw.flavor.id if raw.flavor else None

    def lookup_types(self, client, region, names):
        response = self.call(client.list_flavors, ListFlavorsRequest())
        wanted = set(names)
        return {f.id: flavor_info(f.os_extra_specs) for f in response.flavors or () if f.id in wanted}

    def record(self, region, raw, type_info):
        return record_from_server(region, raw, type_info)

    def is_throttled(self, exc):
        # The SDK's project id lookup (IAM, in build()) raises a plain
        # SdkException from within its handler of the refused answer: the
        # throttled answer is that exception's context.
        for _depth in range(4):
            if exc is None:
                return False
            if str(getattr(exc, "error_code", "")) in THROTTLE_CODES or getattr(exc, "status_code", None) == 429:
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    def is_rejected(self, exc):
        # 401 is the gateway's "not authenticated" whatever code it carries.
        return super().is_rejected(exc) or getattr(exc, "status_code", None) == 401


def flavor_info(specs):
    """GPU and RDMA facts from a flavor's os_extra_specs."""
    info = {"rdma": "none"}
    if specs is None:
        return info
    gpus = _json_list(specs.infogpus)
    if gpus and all(g.get("count") is not None for g in gpus):
        info.update(model=gpus[0].get("name"), count=sum(int(g.get("count") or 0) for g in gpus),
                    memory_mib=gr.mib(gpus[0].get("memory_mb")))
    else:
        # "nvidia-a100:8" (PCI alias) or "v100:direct_graphics:1" (gpu_specs).
        for value, count_at in ((specs.pci_passthroughalias, 1), (specs.pci_passthroughgpu_specs, 2)):
            parts = (value or "").split(":")
            if len(parts) > count_at and parts[count_at].isdigit():
                if count_at == 2 and parts[1] == "virt":
                    info.update(_vgpus(parts[0], int(parts[2])))
                else:
                    info.update(model=parts[0], count=int(parts[count_at]))
                break
        else:
            if specs.ecsperformancetype == "gpu" or str(specs.pci_passthroughenable_gpu).lower() == "true":
                # A GPU flavor (by its performance type) that lists no GPUs:
                # GPU data missing, not "no GPU".
                info["gpu_unknown"] = True
    features = set(_WORDS.findall((specs.infofeatures or "").lower()))
    if features & {"ib", "infiniband"}:
        info["rdma"] = "ib"
    elif features & {"roce", "rdma"}:
        info["rdma"] = "roce"
    return info


def _vgpus(profile, count):
    """GPU facts of ``count`` vGPUs of a profile ("m60_1q": 1 GiB of an M60):
    their share of one GPU, never a whole GPU each; unknown where the
    profile or its board's frame buffer is not known."""
    match = _VGPU_PROFILE.match(profile)
    model = gr.normalize_gpu_model(match.group(1)) if match else None
    share = cat.vgpu_share(model, int(match.group(2))) if match else None
    if share is None:
        return {"gpu_unknown": True}
    return {"model": model, "count": round(count * share, 4), "memory_mib": int(match.group(2)) * 1024}


def _json_list(text):
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def record_from_server(region, server, type_info=None):
    """A record from one ListServersDetails ServerDetail model.
    ``type_info`` None: the flavor's data could not be found; the GPUs are
    then unknown unless the server's own flavor lists them, as they are for
    a GPU flavor whose GPU fields are missing."""
    looked_up = type_info is not None
    type_info = type_info or {}
    private_ip = public_ip = None
    for addresses in (server.addresses or {}).values():
        for address in addresses or ():
            if str(address.version) != "4":
                continue
            if address.os_ext_ip_stype == "floating":
                public_ip = public_ip or address.addr
            else:
                private_ip = private_ip or address.addr
    flavor_gpus = (server.flavor.gpus if server.flavor else None) or []
    gpu_source = "api"
    # A GPU entry without its count is GPU data missing: the flavor's
    # lookup, else unknown, decides.
    if flavor_gpus and all(g.count is not None for g in flavor_gpus):
        gpu = gr.gpu_info(flavor_gpus[0].name, sum(g.count for g in flavor_gpus),
                          gr.mib(flavor_gpus[0].memory_mb))
    elif looked_up and not type_info.get("gpu_unknown"):
        gpu = gr.gpu_info(type_info.get("model"), type_info.get("count"), type_info.get("memory_mib"))
    else:
        gpu, gpu_source = gr.unknown_gpu(), "unknown"
    tags = {}
    for tag in server.tags or ():
        key, _sep, value = str(tag).partition("=")
        if key:
            tags[key] = value
    return gr.make_record(
        "huawei",
        region,
        server.id,
        zone=server.os_ext_a_zavailability_zone,
        instance_type=server.flavor.id if server.flavor else None,
        name=server.name,
        state=gr.normalize_state("huawei", server.status),
        private_ip=private_ip,
        public_ip=public_ip,
        gpu=gpu,
        gpu_source=gpu_source,
        charge_type=_CHARGE.get(str((server.metadata or {}).get("charging_mode")), "unknown"),
        tags=tags,
        # RDMA is the flavor's: without the flavor, not known.
        rdma=type_info.get("rdma", "unknown"),
    )
