"""Each cloud's adapter against its emulator, through the real SDK:
the same behaviour on all four clouds."""

from __future__ import annotations

import math

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import (
    ConfigError,
    CredentialsError,
    MissingLibraryError,
    Settings,
    discover,
)
from ansible_collections.gpufleet.cloud.plugins.module_utils import (
    _discovery_aliyun,
    _discovery_aws,
    _discovery_huawei,
    _discovery_tencent,
    _gpu_catalogue,
)
from ansible_collections.gpufleet.cloud.plugins.module_utils._retry import RetryPolicy
from tests.unit.plugins.conftest import CLOUDS

ADAPTERS = {
    "aliyun": _discovery_aliyun.AliyunAdapter,
    "tencent": _discovery_tencent.TencentAdapter,
    "huawei": _discovery_huawei.HuaweiAdapter,
    "aws": _discovery_aws.AwsAdapter,
}
ADAPTER_MODULES = {
    "aliyun": _discovery_aliyun,
    "tencent": _discovery_tencent,
    "huawei": _discovery_huawei,
    "aws": _discovery_aws,
}
# The action each adapter looks instance types up with.
TYPE_ACTION = {"aliyun": "DescribeInstanceTypes", "tencent": "DescribeInstanceTypeConfigs", "huawei": "ListFlavors",
               "aws": "DescribeInstanceTypes"}
# How each emulator says "this region is down".
UNAVAILABLE = {"aliyun": "ServiceUnavailable", "tencent": "InternalError", "huawei": "Ecs.0000", "aws": "Unavailable"}

pytestmark = pytest.mark.parametrize("cloud", sorted(CLOUDS))


def adapter_for(cloud, emulator, sleeps=None, credentials=None, attempts=5, **kwargs):
    spec = CLOUDS[cloud]
    policy = RetryPolicy(attempts=attempts, sleep=(sleeps if sleeps is not None else []).append, rand=lambda: 1.0)
    settings = Settings(
        endpoint=emulator.url if emulator else None,
        credentials=spec["credentials"] if credentials is None else credentials,
        extra={"iam_endpoint": emulator.url} if spec.get("iam") and emulator else {},
        policy=policy,
        **kwargs,
    )
    return ADAPTERS[cloud](settings)


def test_every_instance_becomes_a_complete_record(cloud, start_emulator):
    emulator = start_emulator(cloud, count=24)
    seeded = {i["instance_id"]: i for region in emulator.instances.values() for i in region}
    result = discover(adapter_for(cloud, emulator), CLOUDS[cloud]["regions"])
    assert result.complete
    assert {r["instance_id"] for r in result.records} == set(seeded)
    for record in result.records:
        source = seeded[record["instance_id"]]
        assert tuple(record) == gr.RECORD_KEYS
        assert record["provider"] == cloud
        assert (record["region"], record["zone"], record["instance_type"], record["state"]) == (
            source["region"], source["zone"], source["instance_type"], source["state"])
        assert record["private_ip"] == source["private_ip"]
        assert record["spot"] is (source["charge"] == "spot")
        assert {k: v for k, v in record["tags"].items() if k != "Name"} == source["tags"]
        assert record["rdma"] in gr.RDMA_KINDS
        # Every emulator catalogue has one CPU type; the rest have GPUs.
        assert bool(record["gpu"]["count"]) is bool(record["gpu"]["model"])


def test_pagination_walks_several_pages(cloud, start_emulator):
    emulator = start_emulator(cloud, count=23)
    region = CLOUDS[cloud]["regions"][0]
    in_region = len(emulator.instances[region])
    result = discover(adapter_for(cloud, emulator, page_size=5), [region])
    assert len(result.records) == in_region
    assert in_region > 10
    assert emulator.count(CLOUDS[cloud]["list_action"], region) == math.ceil(in_region / 5)


def test_throttled_calls_are_retried_with_backoff(cloud, start_emulator):
    emulator = start_emulator(cloud, count=6)
    region = CLOUDS[cloud]["regions"][0]
    emulator.faults.throttle(2, region=region, action=CLOUDS[cloud]["list_action"])
    sleeps = []
    result = discover(adapter_for(cloud, emulator, sleeps=sleeps), [region])
    assert result.complete and len(result.records) == len(emulator.instances[region])
    # Full jitter at its top (rand=1.0): the first two ceilings.
    assert sleeps == [0.5, 1.0]


def test_throttling_past_the_retries_fails_only_that_region(cloud, start_emulator):
    emulator = start_emulator(cloud, count=6)
    throttled, healthy = CLOUDS[cloud]["regions"]
    emulator.faults.throttle(50, region=throttled, action=CLOUDS[cloud]["list_action"])
    result = discover(adapter_for(cloud, emulator, attempts=3), [throttled, healthy])
    assert [f.region for f in result.failures] == [throttled]
    assert "still throttled after 3 attempts" in result.failures[0].error
    assert {r["region"] for r in result.records} == {healthy}


def test_a_failed_region_is_reported_and_the_others_listed(cloud, start_emulator):
    emulator = start_emulator(cloud, count=6)
    down, healthy = CLOUDS[cloud]["regions"]
    emulator.faults.failed_regions.add(down)
    result = discover(adapter_for(cloud, emulator), [down, healthy])
    assert [f.region for f in result.failures] == [down]
    assert UNAVAILABLE[cloud] in result.failures[0].error
    assert len(result.records) == len(emulator.instances[healthy])


def test_each_call_has_a_timeout(cloud, start_emulator):
    emulator = start_emulator(cloud, count=4)
    slow, healthy = CLOUDS[cloud]["regions"]
    emulator.faults.region_latency[slow] = 3.0
    result = discover(adapter_for(cloud, emulator, timeout=0.3), [slow, healthy])
    assert [f.region for f in result.failures] == [slow]
    assert "timed out" in result.failures[0].error.lower() or "timeout" in result.failures[0].error.lower()
    assert {r["region"] for r in result.records} == {healthy}


def test_regions_are_discovered_through_the_api(cloud, start_emulator):
    emulator = start_emulator(cloud, count=4)
    result = discover(adapter_for(cloud, emulator), [])
    assert set(CLOUDS[cloud]["regions"]) <= set(result.regions)
    assert len(result.records) == 4 and result.complete


def test_missing_credentials_name_what_to_set(cloud):
    adapter = adapter_for(cloud, None, credentials={})
    with pytest.raises(CredentialsError) as info:
        adapter.check_credentials()
    for option in CLOUDS[cloud]["credentials"]:
        assert option in str(info.value)


def test_half_a_key_pair_names_the_missing_option(cloud):
    key, secret = CLOUDS[cloud]["credentials"]
    adapter = adapter_for(cloud, None, credentials={key: "only-the-key"})
    with pytest.raises(ConfigError) as info:
        adapter.check_credentials()
    assert info.value.option == secret


def test_a_region_of_another_shape_is_refused(cloud):
    bad = "eu_west_1" if cloud != "aws" else "cn-hangzhou"
    with pytest.raises(ConfigError, match="option 'regions'"):
        discover(adapter_for(cloud, None), [bad])


def test_a_missing_sdk_names_the_library(cloud, monkeypatch):
    monkeypatch.setattr(ADAPTERS[cloud], "import_error", ImportError("No module named sdk"))
    with pytest.raises(MissingLibraryError) as info:
        adapter_for(cloud, None)
    assert info.value.library == ADAPTER_MODULES[cloud].LIBRARY
    assert ADAPTER_MODULES[cloud].HAS_SDK


# Per cloud: a GPU type the built-in catalogue lists, and a GPU type it
# does not (each in the emulator's own catalogue).
CATALOGUED = {
    "aliyun": ("ecs.gn7i-c8g1.2xlarge", "ecs.sccgn7ex.32xlarge"),
    "tencent": ("GN7.2XLARGE32", "HCCPNV4h.48XLARGE1152"),
    "huawei": ("pi2.2xlarge.4", "p3.2xlarge.8"),
    "aws": ("g5.2xlarge", "g5g.xlarge"),
}


def test_gpu_fields_missing_keep_the_instance_with_catalogue_or_unknown_gpus(cloud, start_emulator):
    emulator = start_emulator(cloud)
    region, healthy = CLOUDS[cloud]["regions"]
    listed, unlisted = CATALOGUED[cloud]
    assert _gpu_catalogue.lookup(cloud, listed) and _gpu_catalogue.lookup(cloud, unlisted) is None
    seeded = emulator.seed([{"region": r, "instance_type": t, "name": "%s-%d" % (r, i)}
                            for r in (region, healthy) for i, t in enumerate((listed, unlisted))])
    # Both the listing and the type lookup without GPU fields: where the
    # instance carries its own (Alibaba, Tencent) and where only the type does.
    for action in (CLOUDS[cloud]["list_action"], TYPE_ACTION[cloud]):
        emulator.faults.gpu_fields_missing.add((region, action))
    adapter = adapter_for(cloud, emulator)
    result = discover(adapter, [region, healthy])
    assert result.complete
    by_id = {r["instance_id"]: r for r in result.records}
    assert set(by_id) == {i["instance_id"] for i in seeded if i}
    ids = {(i["region"], i["instance_type"]): i["instance_id"] for i in seeded if i}
    from_catalogue, unknown = by_id[ids[region, listed]], by_id[ids[region, unlisted]]
    assert from_catalogue["gpu_source"] == "catalogue"
    assert from_catalogue["gpu"] == _gpu_catalogue.lookup(cloud, listed)
    assert from_catalogue["gpu"]["count"] >= 1
    assert unknown["gpu_source"] == "unknown"
    assert unknown["gpu"] == {"model": None, "count": None, "memory_mib": None}
    # The healthy region's are the API's own.
    assert {by_id[ids[healthy, t]]["gpu_source"] for t in (listed, unlisted)} == {"api"}
    assert by_id[ids[healthy, listed]]["gpu"]["count"] == from_catalogue["gpu"]["count"]
    # A warning names each instance and what happened to its GPU data.
    said = [w.message for w in result.warnings if w.region == region]
    assert any(ids[region, listed] in m and "catalogue" in m and listed in m for m in said), said
    assert any(ids[region, unlisted] in m and "unknown" in m for m in said), said
    assert not [w for w in result.warnings if w.region == healthy]


# A share of one GPU on each cloud, as its API says it: Tencent's
# GPUCount 0.25; Alibaba's GPUSpec "NVIDIA A10 * 1/12" beside a whole
# GPUAmount; a Huawei vGPU flavor's gpu_specs profile (M60-1Q, 1 GiB of 8);
# EC2's Count 0 with GpuPartitionSize 0.125 (g6f.large, moto's own data).
SHARES = {
    "tencent": ("GNV4.3XLARGE46", {"model": "A10", "count": 0.25, "memory_mib": 6144}),
    "aliyun": ("ecs.sgn7i-vws-m2.xlarge", {"model": "A10", "count": 0.0833, "memory_mib": 2048}),
    "huawei": ("g1.xlarge", {"model": "M60", "count": 0.125, "memory_mib": 1024}),
    "aws": ("g6f.large", {"model": "L4", "count": 0.125, "memory_mib": 2861}),
}


def test_a_share_of_a_gpu_stays_the_number_it_is(cloud, start_emulator):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    instance_type, gpu = SHARES[cloud]
    emulator.seed([{"region": region, "instance_type": instance_type}])
    result = discover(adapter_for(cloud, emulator), [region])
    [record] = result.records
    assert record["gpu"] == gpu
    assert isinstance(record["gpu"]["count"], float) and record["gpu_source"] == "api"
    assert gr.matches(record, gpu_only=True) and gr.is_share(record["gpu"]["count"])
    assert result.warnings == []


@pytest.mark.parametrize("kind", ["unknown_key", "bad_signature"])
def test_rejected_credentials_name_the_options_and_never_the_secret(cloud, kind, start_emulator):
    emulator = start_emulator(cloud, count=4)
    emulator.faults.rejected_credentials = kind
    key_option, secret_option = CLOUDS[cloud]["credentials"]
    secret = CLOUDS[cloud]["credentials"][secret_option]
    # Listed regions, and regions discovered through the API: one error,
    # not a failure per region, and no retry (a refusal is not throttling).
    for regions in (CLOUDS[cloud]["regions"], []):
        sleeps = []
        adapter = adapter_for(cloud, emulator, sleeps=sleeps)
        with pytest.raises(CredentialsError) as info:
            discover(adapter, regions)
        message = str(info.value)
        assert message.startswith(adapter.cloud_name + " rejected the credentials of the %s and %s options"
                                  % (key_option, secret_option)), message
        for name in adapter.key_env:
            assert name in message
        assert "region" not in message
        assert secret not in message + info.value.detail
        assert sleeps == []


def test_rejected_credentials_from_the_environment_name_the_variables(cloud, start_emulator, monkeypatch):
    emulator = start_emulator(cloud, count=4)
    emulator.faults.rejected_credentials = "unknown_key"
    adapter = adapter_for(cloud, emulator, credentials={})
    key_var, secret_var = adapter.key_env
    monkeypatch.setenv(key_var, "ENV-key-id")
    monkeypatch.setenv(secret_var, "env-secret-value")
    if cloud == "aliyun":
        # This SDK reads its environment once, when it is imported.
        from alibabacloud_credentials.utils import auth_util
        monkeypatch.setattr(auth_util, "environment_access_key_id", "ENV-key-id")
        monkeypatch.setattr(auth_util, "environment_access_key_secret", "env-secret-value")
    with pytest.raises(CredentialsError) as info:
        discover(adapter, CLOUDS[cloud]["regions"])
    message = str(info.value)
    assert message.startswith(adapter.cloud_name + " rejected the credentials its SDK found"), message
    assert "correct %s and %s" % (key_var, secret_var) in message
    assert "or set the %s options" % " and ".join(CLOUDS[cloud]["credentials"]) in message
    assert "env-secret-value" not in message + info.value.detail
    # A secret the chain found is masked like a configured one.
    assert adapter.describe_error(RuntimeError("echoed env-secret-value")) == "RuntimeError: echoed ********"


def test_no_credentials_name_the_variables_and_keep_the_sdk_reason_apart(cloud):
    adapter = adapter_for(cloud, None, credentials={})
    with pytest.raises(CredentialsError) as info:
        adapter.check_credentials()
    message = str(info.value)
    for name in adapter.key_env:
        assert name in message
    # The chain's story (each provider that found nothing) is the detail,
    # not the message: the message is one sentence of what to set.
    assert message.startswith("no %s credentials: set the " % adapter.cloud_name)
    assert "\n" not in message and "Traceback" not in message
