# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWS EC2 discovery through the official SDK (boto3).

Private to gpufleet.cloud; see _discovery.py for the shared flow.

- Instances: DescribeInstances, NextToken paging, 1000 a page (the maximum).
- GPU data: DescribeInstanceTypes (100 types a call): GpuInfo gives the
  model, count and memory of one GPU; NetworkInfo.EfaSupported gives "efa".
- Charge type: InstanceLifecycle "spot" is spot, "capacity-block" was paid
  up front (subscription), host tenancy is a dedicated host.
- Throttling: EC2's throttling codes (RequestLimitExceeded and friends).
  botocore's own retries are off, so every retry goes through _retry.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import Adapter, ConfigError, CredentialsError, require
from ansible_collections.gpufleet.cloud.plugins.module_utils._pagination import by_token

try:
    import boto3
    import botocore.session
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import ProfileNotFound
    HAS_SDK, IMPORT_ERROR = True, None
except ImportError as exc:
    HAS_SDK, IMPORT_ERROR = False, exc

LIBRARY = "boto3"
PAGE_SIZE = 1000
TYPES_PER_CALL = 100
# DescribeRegions is answered by any enabled region; this one always is.
HOME_REGION = "us-east-1"
THROTTLE_CODES = frozenset((
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
    "BandwidthLimitExceeded",
))
# The codes with which AWS refuses the credentials themselves (EC2 says
# AuthFailure; STS-style endpoints InvalidClientTokenId). AuthFailure is
# also EC2's answer in an opt-in region the account has not enabled: that
# region fails alone, and its message says what AWS said.
AUTH_CODES = frozenset((
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "InvalidAccessKeyId",
    "ExpiredToken",
    "ExpiredTokenException",
))


class AwsAdapter(Adapter):
    provider = "aws"
    region_pattern = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+$")
    region_example = "us-east-1"
    library = LIBRARY
    list_action = "DescribeInstances"
    import_error = IMPORT_ERROR
    cloud_name = "AWS"
    key_options = ("access_key", "secret_key")
    key_env = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    other_sources = "a profile (the profile option or AWS_PROFILE), or an instance role"
    auth_error_codes = AUTH_CODES

    def __init__(self, settings):
        super().__init__(settings)
        self._session = None
        self._config = BotoConfig(
            connect_timeout=self.settings.timeout,
            read_timeout=self.settings.timeout,
            retries={"total_max_attempts": 1},
            max_pool_connections=4,
        )

    def check_credentials(self):
        creds = self.settings.credentials
        key, secret = self.key_pair("access_key", "secret_key")
        # No record field is a timestamp, and botocore's default parser
        # (dateutil) was a third of the CPU of listing instances: keep the
        # three timestamps of every instance as the strings they arrive as.
        core = botocore.session.get_session()
        core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=str)
        try:
            # Unset values leave boto3 its default chain: environment,
            # shared config and credentials files, SSO, the instance role.
            session = boto3.session.Session(
                aws_access_key_id=key,
                aws_secret_access_key=secret,
                aws_session_token=creds.get("session_token"),
                profile_name=creds.get("profile"),
                botocore_session=core,
            )
        except ProfileNotFound as exc:
            raise ConfigError("profile", "no AWS profile named %r in the shared config files" % creds["profile"]) from exc
        try:
            found = session.get_credentials()
            frozen = found.get_frozen_credentials() if found is not None else None
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: a provider of the chain (SSO, assume-role) can fail in
            # its own way; the user needs to know the chain came up empty.
            # Its reason (an expired SSO token, a role it may not assume)
            # is the message: nothing else says what to fix.
            raise CredentialsError(
                "could not load AWS credentials (%s): fix the profile or role it names, or set the access_key and "
                "secret_key options, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" % self.describe_error(exc)
            ) from exc
        if frozen is None:
            raise self.missing_credentials()
        self.resolved_secrets = [frozen.secret_key, frozen.token]
        self._session = session

    def client(self, region):
        # A boto3 session is not thread-safe; making clients one at a time
        # is. The clients themselves are safe to use from their threads.
        with self._lock:
            return self._session.client("ec2", region_name=region, endpoint_url=self.endpoint_for(region),
                                        config=self._config)

    def list_regions(self):
        response = self.call(self.client(HOME_REGION).describe_regions)
        return [r["RegionName"] for r in response.get("Regions", ()) if r.get("RegionName")]

    def pages(self, client, region):
        page_size = self.settings.page_size or PAGE_SIZE

        def fetch(token):
            kwargs = {"MaxResults": page_size}
            if token:
                kwargs["NextToken"] = token
            response = self.call(client.describe_instances, **kwargs)
            reservations = require(response.get("Reservations"), "DescribeInstances", "Reservations")
            instances = [i for r in reservations for i in r.get("Instances", ())]
            return instances, response.get("NextToken")
        return by_token(fetch)

    def instance_type_of(self, raw):
        return raw.get("InstanceType")

    def lookup_types(self, client, region, names):
        found = {}
        for start in range(0, len(names), TYPES_PER_CALL):
            batch = names[start:start + TYPES_PER_CALL]

            def fetch(token, batch=batch):
                kwargs = {"InstanceTypes": batch}
                if token:
                    kwargs["NextToken"] = token
                response = self.call(client.describe_instance_types, **kwargs)
                return response.get("InstanceTypes", ()), response.get("NextToken")
            for page in by_token(fetch):
                for item in page:
                    found[item["InstanceType"]] = type_info(item)
        return found

    def record(self, region, raw, type_info):
        return record_from_instance(region, raw, type_info)

    def is_throttled(self, exc):
        return self.error_code(exc) in THROTTLE_CODES

    @staticmethod
    def error_code(exc):
        return ((getattr(exc, "response", None) or {}).get("Error") or {}).get("Code")

    @staticmethod
    def error_message(exc):
        return ((getattr(exc, "response", None) or {}).get("Error") or {}).get("Message") or str(exc)


# EC2's InstanceLifecycle (absent: on demand, or a dedicated host by its
# tenancy). An interruptible Capacity Reservation's instances are reclaimed
# with the 2-minute notice spot instances get, so they are spot here: the
# guard watches for that notice. A Capacity Block and a Scheduled Instance
# are capacity bought ahead for a term.
LIFECYCLE_CHARGE = {
    "spot": "spot",
    "interruptible-capacity-reservation": "spot",
    "capacity-block": "subscription",
    "scheduled": "subscription",
}


def gpu_share(gpu):
    """One GpuDeviceInfo's GPUs: its Count, or for a partitioned type (a
    GpuPartitionSize below 1: g6f, gr6f) its LogicalGpuCount devices times
    the share of a GPU each is (1 x 0.125 = 0.125); None when it does not
    say. A partitioned type's Count is 0, which is not "no GPU"."""
    part = gpu.get("GpuPartitionSize")
    if part is not None and 0 < float(part) < 1:
        logical = gpu.get("LogicalGpuCount")
        return None if logical is None else round(float(logical) * float(part), 4)
    return gpu.get("Count")


def type_info(item):
    """GPU and RDMA facts from one DescribeInstanceTypes entry."""
    gpus = (item.get("GpuInfo") or {}).get("Gpus") or []
    efa = (item.get("NetworkInfo") or {}).get("EfaSupported")
    rdma = "efa" if efa else "none"
    if "GpuInfo" in item and (not gpus or any(gpu_share(g) is None for g in gpus)):
        # A type without GPUs has no GpuInfo at all; GpuInfo without its
        # GPUs or their counts is GPU data missing, not "no GPU".
        return {"rdma": rdma, "gpu_unknown": True}
    if not gpus:
        return {"rdma": rdma}
    return {
        "model": gpus[0].get("Name"),
        "count": sum(gpu_share(g) for g in gpus),
        "memory_mib": gr.mib((gpus[0].get("MemoryInfo") or {}).get("SizeInMiB")),
        "rdma": rdma,
    }


def record_from_instance(region, inst, type_info=None):
    """A record from one DescribeInstances instance (a boto3 dict).
    ``type_info`` None: the type's data could not be found, so its GPUs
    are unknown (an instance carries none of its own), as they are when
    the type's GPU fields are missing."""
    if type_info is None or type_info.get("gpu_unknown"):
        gpu, gpu_source, type_info = gr.unknown_gpu(), "unknown", type_info or {}
    else:
        gpu = gr.gpu_info(type_info.get("model"), type_info.get("count"), type_info.get("memory_mib"))
        gpu_source = "api"
    tags = gr.tags_from_pairs(inst.get("Tags"))
    placement = inst.get("Placement") or {}
    lifecycle = inst.get("InstanceLifecycle")
    if lifecycle:
        # A lifecycle EC2 adds later is not known, never "on demand".
        charge = LIFECYCLE_CHARGE.get(lifecycle, "unknown")
    elif placement.get("Tenancy") == "host":
        charge = "dedicated_host"
    else:
        charge = "on_demand"
    return gr.make_record(
        "aws",
        region,
        inst["InstanceId"],
        zone=placement.get("AvailabilityZone"),
        instance_type=inst.get("InstanceType"),
        name=tags.get("Name"),
        state=gr.normalize_state("aws", (inst.get("State") or {}).get("Name")),
        private_ip=inst.get("PrivateIpAddress"),
        public_ip=inst.get("PublicIpAddress"),
        gpu=gpu,
        gpu_source=gpu_source,
        charge_type=charge,
        tags=tags,
        # EFA support is the type's: without the type, not known.
        rdma=type_info.get("rdma", "unknown"),
    )
