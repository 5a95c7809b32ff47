"""Listing faults, each against each cloud's emulator through the real
SDK: an instance without a private address, a page that fails part-way, a
region that hangs, an empty region, duplicate names and odd tags. In every case no instance is lost without a word."""

from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import discover
from tests.emulators import fleet
from tests.unit.plugins.conftest import CLOUDS
from tests.unit.plugins.module_utils.test_discovery_clouds import UNAVAILABLE, adapter_for

pytestmark = pytest.mark.parametrize("cloud", sorted(CLOUDS))

# Tag keys and values the clouds allow that a naive parser or group name
# would trip on: spaces, dots, slashes, colons, '=' in a value, non-ASCII
# letters, an empty value. (Huawei's API joins key and value with '=', so
# no key has one.)
ODD_TAGS = {
    "team name": "ml ops",
    "k8s.io/role": "gpu.worker",
    "cost:center": "a:b:c",
    "团队": "机器学习",
    "Ünïcode": "välue",
    "expr": "a=b+c@d",
    "empty": "",
}
# How long a test waits for a hung region to fail, beyond the calls'
# own timeout: generous, for a busy machine; the region itself would hang
# for as long as the test let it.
SLACK = 15.0


def gpu_type(emulator):
    return sorted(t for t in emulator.CATALOG if fleet.has_gpu(emulator.CATALOG[t], t))[0]


def seed(emulator, specs):
    """Seed ``specs`` (the seed format), each with a GPU type by default."""
    return emulator.seed([dict({"instance_type": gpu_type(emulator)}, **spec) for spec in specs])


def test_an_instance_without_a_private_ip_is_kept_with_it_null(cloud, start_emulator):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    bare, *others = seed(emulator, [{"region": region, "name": "bare", "private_ip": None},
                                    {"region": region, "name": "a", "private_ip": "10.9.0.1"},
                                    {"region": region, "name": "b", "private_ip": "10.9.0.2"}])
    result = discover(adapter_for(cloud, emulator), [region])
    assert result.complete and not result.warnings
    by_id = {r["instance_id"]: r for r in result.records}
    assert set(by_id) == {bare["instance_id"]} | {o["instance_id"] for o in others}
    assert by_id[bare["instance_id"]]["private_ip"] is None
    assert by_id[bare["instance_id"]]["name"] == "bare"
    for other in others:
        assert by_id[other["instance_id"]]["private_ip"] == other["private_ip"]


def test_a_page_failing_part_way_fails_the_region_never_lists_it_partly(cloud, start_emulator):
    emulator = start_emulator(cloud, count=24)
    broken, healthy = CLOUDS[cloud]["regions"]
    action = CLOUDS[cloud]["list_action"]
    # 12 instances a region at 5 a page: pages 1 and 3 answer, page 2 fails.
    assert len(emulator.instances[broken]) > 10
    emulator.faults.fail_page(broken, action, 2)
    result = discover(adapter_for(cloud, emulator, page_size=5), [broken, healthy])
    assert not result.complete
    assert [f.region for f in result.failures] == [broken]
    error = result.failures[0].error
    assert "%s page 2 failed" % action in error
    assert "5 instance(s) on the pages before it not listed" in error
    assert UNAVAILABLE[cloud] in error
    # Nothing of the broken region, not even its first page; the other whole.
    assert {r["region"] for r in result.records} == {healthy}
    assert {r["instance_id"] for r in result.records} == {i["instance_id"] for i in emulator.instances[healthy]}
    # The failed page is not asked again, and the listing stops there.
    assert emulator.count(action, broken) == 2


def test_a_region_that_hangs_fails_within_the_timeout_and_the_others_are_kept(cloud, start_emulator):
    emulator = start_emulator(cloud, count=8)
    hung, healthy = CLOUDS[cloud]["regions"]
    emulator.faults.hung_regions.add(hung)
    timeout = 1.0
    adapter = adapter_for(cloud, emulator, timeout=timeout)
    outcome = {}
    finished = threading.Event()

    def run():
        started = time.monotonic()
        try:
            outcome["result"] = discover(adapter, [hung, healthy])
        finally:
            outcome["elapsed"] = time.monotonic() - started
            finished.set()

    threading.Thread(target=run, daemon=True).start()
    # The hung region's first listing call never answers: it must give up
    # after one timeout (twice that allows for a connect and a read).
    deadline = 2 * timeout + SLACK
    assert finished.wait(deadline), "the hung region was still being waited on after %.0f s" % deadline
    result = outcome["result"]
    assert [f.region for f in result.failures] == [hung]
    assert "timed out" in result.failures[0].error.lower() or "timeout" in result.failures[0].error.lower()
    assert outcome["elapsed"] >= timeout
    assert {r["instance_id"] for r in result.records} == {i["instance_id"] for i in emulator.instances[healthy]}
    # A call that timed out is not retried: only throttling is.
    assert emulator.count(CLOUDS[cloud]["list_action"], hung) == 1


def test_an_empty_region_is_complete_and_quiet(cloud, start_emulator):
    emulator = start_emulator(cloud)
    full, empty = CLOUDS[cloud]["regions"]
    seeded = emulator.seed(fleet.generate(emulator.CATALOG, [full], 4))
    result = discover(adapter_for(cloud, emulator), [full, empty])
    assert result.complete and result.failures == [] and result.warnings == []
    assert set(result.regions) == {full, empty}
    assert {r["instance_id"] for r in result.records} == {i["instance_id"] for i in seeded}
    # It was asked, and answered "nothing here".
    assert emulator.count(CLOUDS[cloud]["list_action"], empty) == 1


def test_instances_with_the_same_name_are_distinct_records(cloud, start_emulator):
    emulator = start_emulator(cloud)
    first, second = CLOUDS[cloud]["regions"]
    seeded = seed(emulator, [{"region": first, "name": "gpu-twin"}, {"region": first, "name": "gpu-twin"},
                             {"region": second, "name": "gpu-twin"}])
    result = discover(adapter_for(cloud, emulator), [first, second])
    assert result.complete
    assert len({i["instance_id"] for i in seeded}) == 3
    assert sorted(r["instance_id"] for r in result.records) == sorted(i["instance_id"] for i in seeded)
    assert [r["name"] for r in result.records] == ["gpu-twin"] * 3


def test_odd_and_non_ascii_tags_are_kept_as_they_are(cloud, start_emulator):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    (inst,) = seed(emulator, [{"region": region, "name": "odd", "tags": dict(ODD_TAGS)}])
    result = discover(adapter_for(cloud, emulator), [region])
    (record,) = result.records
    assert record["instance_id"] == inst["instance_id"]
    tags = dict(record["tags"])
    if cloud == "aws":
        # EC2 has no name field: the Name tag is the name.
        assert tags.pop("Name") == "odd"
    assert tags == ODD_TAGS
