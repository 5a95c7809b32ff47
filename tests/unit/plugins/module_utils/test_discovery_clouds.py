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
