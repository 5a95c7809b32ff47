"""Counts that lie, on the two clouds whose listings carry a total
(Tencent's TotalCount, Huawei's count), through the real SDK against each
emulator: a total too low keeps every instance and says so (an error under
strict_regions); a total too high is an error, as before. And Huawei's
calls before the listing (IAM's projects, each region's project id, which
the SDK looks up itself) retried when throttled, as the listing is; and
RDMA that only the instance type says, unknown when the type's lookup
failed, never "none"."""

from __future__ import annotations

import pytest
from huaweicloudsdkcore.auth import credentials

from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import discover
from tests.unit.plugins.conftest import CLOUDS, inventory_or_refusal, plugin_config
from tests.unit.plugins.module_utils.test_discovery_clouds import ADAPTER_MODULES, TYPE_ACTION, adapter_for

COUNTED = ["huawei", "tencent"]


@pytest.mark.parametrize("cloud", COUNTED)
@pytest.mark.parametrize("skew", [-7, -12])
def test_a_total_too_low_keeps_every_instance_and_names_the_region(cloud, skew, start_emulator):
    emulator = start_emulator(cloud, count=24)
    low, honest = CLOUDS[cloud]["regions"]
    emulator.faults.total_skew[low] = skew
    result = discover(adapter_for(cloud, emulator, page_size=5), [low, honest])
    assert result.complete and result.failures == []
    seeded = {i["instance_id"] for region in emulator.instances.values() for i in region}
    assert {r["instance_id"] for r in result.records} == seeded
    (warning,) = result.warnings
    held = len(emulator.instances[low])
    assert warning.region == low and warning.strict
    assert warning.message.startswith("the listing's total count said %d instance(s), but its " % (held + skew))
    assert "held %d: every one is kept" % held in warning.message


@pytest.mark.parametrize("cloud", COUNTED)
def test_a_total_too_high_fails_the_region_and_keeps_the_others(cloud, start_emulator):
    emulator = start_emulator(cloud, count=24)
    high, honest = CLOUDS[cloud]["regions"]
    emulator.faults.total_skew[high] = 3
    result = discover(adapter_for(cloud, emulator, page_size=5), [high, honest])
    assert [f.region for f in result.failures] == [high]
    assert "the listing ended short" in result.failures[0].error
    assert {r["region"] for r in result.records} == {honest}


@pytest.mark.parametrize("cloud", COUNTED)
@pytest.mark.parametrize("strict", [False, True])
def test_through_the_plugin_a_low_total_is_a_warning_or_with_strict_regions_an_error(
        cloud, strict, start_emulator, run_inventory, warnings, monkeypatch):
    monkeypatch.setattr(ADAPTER_MODULES[cloud], "PAGE_SIZE", 5)
    emulator = start_emulator(cloud, count=24, stopped_share=0.0)
    low = CLOUDS[cloud]["regions"][0]
    emulator.faults.total_skew[low] = -9
    config = plugin_config(cloud, emulator, hostnames=["instance_id"], gpu_only=False, strict_regions=strict)
    inventory, message = inventory_or_refusal(run_inventory, config, strict)
    if inventory is not None:
        listed = {h.name for h in inventory.groups["all"].get_hosts()}
        assert listed == {i["instance_id"] for region in emulator.instances.values() for i in region}
        (message,) = [w for w in warnings if "total count said" in w]
    assert "region %s: the listing's total count said" % low in message


def test_a_throttled_project_id_lookup_is_retried_like_the_listing(start_emulator, monkeypatch):
    """Huawei's SDK asks IAM for each region's project id before the first
    ECS call; one HTTP 429 there must not fail the region."""
    # The SDK keeps the ids it found for the process: start without any.
    monkeypatch.setattr(credentials.Credentials, "_CACHE", {})
    emulator = start_emulator("huawei", count=8)
    region, other = CLOUDS["huawei"]["regions"]
    emulator.faults.throttle(2, action="KeystoneListProjects")
    sleeps = []
    result = discover(adapter_for("huawei", emulator, sleeps=sleeps), [region, other])
    assert result.complete and result.failures == []
    assert {r["instance_id"] for r in result.records} == {
        i["instance_id"] for r in emulator.instances.values() for i in r}
    # Two throttled answers, each retried after a backoff, then one per region.
    assert emulator.count("KeystoneListProjects") == 4 and len(sleeps) == 2


@pytest.mark.parametrize("action", ["KeystoneListAuthProjects", "KeystoneListProjects"])
def test_region_discovery_retries_each_throttled_iam_call(action, start_emulator, monkeypatch):
    """Without regions, Huawei's regions come from IAM (the account's
    projects), then each region's project id. One throttled answer on
    either must not fail the cloud."""
    monkeypatch.setattr(credentials.Credentials, "_CACHE", {})
    emulator = start_emulator("huawei", count=8)
    emulator.faults.throttle(1, action=action)
    sleeps = []
    result = discover(adapter_for("huawei", emulator, sleeps=sleeps))
    assert result.complete and sorted(result.regions) == sorted(CLOUDS["huawei"]["regions"])
    assert len(result.records) == 8 and len(sleeps) == 1
    # The throttled call and its retry (the project id lookup: then one more
    # for the other region).
    assert emulator.count(action) == (2 if action == "KeystoneListAuthProjects" else 3)


# A type whose RDMA only the type lookup says, per cloud (the emulators'
# catalogues): eRDMA interfaces, EFA, an InfiniBand flavor.
RDMA_FROM_THE_TYPE = {"aliyun": ("ecs.gn8v-8x.48xlarge", "erdma"), "aws": ("p4d.24xlarge", "efa"),
                      "huawei": ("p3.16xlarge.8", "ib")}


@pytest.mark.parametrize("cloud", sorted(RDMA_FROM_THE_TYPE))
def test_rdma_the_type_says_is_unknown_when_its_lookup_stays_throttled(cloud, start_emulator):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    instance_type, kind = RDMA_FROM_THE_TYPE[cloud]
    emulator.seed([{"region": region, "instance_type": instance_type, "name": "rdma-node"}])
    # The lookup answers: the type says what it has.
    (answered,) = discover(adapter_for(cloud, emulator), [region]).records
    assert answered["rdma"] == kind
    # It stays throttled: not known, never "none"; the instance is kept.
    emulator.faults.throttle(50, action=TYPE_ACTION[cloud])
    result = discover(adapter_for(cloud, emulator, attempts=2), [region])
    assert result.complete
    (record,) = result.records
    assert record["rdma"] == "unknown" and record["instance_id"] == answered["instance_id"]
    assert any("looking up instance types" in w.message for w in result.warnings)


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_every_call_throttled_twice_loses_nothing(cloud, start_emulator, monkeypatch):
    """Each action discovery makes (region discovery, IAM's projects and
    project ids on Huawei, the listing, the type lookup) answered with its
    cloud's throttling error twice before it answers: the same records,
    regions and warnings as an unthrottled run, every action retried."""
    monkeypatch.setattr(credentials.Credentials, "_CACHE", {})
    emulator = start_emulator(cloud, count=16)
    calm = discover(adapter_for(cloud, emulator))
    actions = sorted({c["action"] for c in emulator.calls})
    assert CLOUDS[cloud]["list_action"] in actions and TYPE_ACTION[cloud] in actions, actions
    monkeypatch.setattr(credentials.Credentials, "_CACHE", {})
    emulator.calls.clear()
    for action in actions:
        emulator.faults.throttle(2, action=action)
    sleeps = []
    stormy = discover(adapter_for(cloud, emulator, sleeps=sleeps))
    assert stormy.complete and stormy.failures == []
    assert sorted(stormy.regions) == sorted(calm.regions)
    assert sorted(stormy.records, key=lambda r: r["instance_id"]) == sorted(calm.records, key=lambda r: r["instance_id"])
    assert [w.message for w in stormy.warnings] == [w.message for w in calm.warnings]
    assert len(sleeps) == 2 * len(actions)
    # Every action was answered after its two throttled attempts.
    assert {c["action"] for c in emulator.calls} == set(actions)
