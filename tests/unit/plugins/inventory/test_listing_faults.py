"""Listing faults (no private address, a page that fails part way, an empty
region, duplicate names, odd tags) through the four inventory plugins: what
becomes of each instance as a host, and what the inventory says about
those it leaves out."""

from __future__ import annotations

import pytest
from ansible import constants as C

from tests.emulators import fleet
from tests.unit.plugins.conftest import CLOUDS, inventory_or_refusal, plugin_config
from tests.unit.plugins.module_utils.test_discovery_clouds import ADAPTER_MODULES, UNAVAILABLE
from tests.unit.plugins.module_utils.test_discovery_listing_faults import ODD_TAGS, seed

pytestmark = pytest.mark.parametrize("cloud", sorted(CLOUDS))


def hosts(inventory):
    return {h.name: h.get_vars() for h in inventory.groups["all"].get_hosts()}


def test_an_instance_without_a_private_ip_stays_a_host_and_is_named_in_a_warning(
        cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    bare, other = seed(emulator, [{"region": region, "name": "bare", "private_ip": None, "public_ip": None},
                                  {"region": region, "name": "other", "private_ip": "10.9.0.2"}])
    # The default hostnames: private_ip, then instance_id.
    listed = hosts(run_inventory(plugin_config(cloud, emulator)))
    assert set(listed) == {bare["instance_id"], other["private_ip"]}
    variables = listed[bare["instance_id"]]
    assert variables["gpufleet_private_ip"] is None and variables["gpufleet_name"] == "bare"
    said = [w for w in warnings if bare["instance_id"] in w]
    assert len(said) == 1
    assert "has no private IP address" in said[0] and "no address to connect to" in said[0]
    assert "ansible_host: gpufleet_public_ip" in said[0]
    assert not any(other["instance_id"] in w for w in warnings)


def test_with_compose_the_warning_says_what_ansible_connects_to(cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    (bare,) = seed(emulator, [{"region": region, "name": "bare", "private_ip": None}])
    config = plugin_config(cloud, emulator, hostnames=["instance_id"],
                           compose={"ansible_host": "gpufleet_private_ip | default('192.0.2.7', true)"})
    listed = hosts(run_inventory(config))
    assert listed[bare["instance_id"]]["ansible_host"] == "192.0.2.7"
    (said,) = [w for w in warnings if bare["instance_id"] in w]
    assert "ansible_host is 192.0.2.7" in said


@pytest.mark.parametrize("strict", [False, True])
def test_a_page_failing_part_way_leaves_its_region_out_and_strict_regions_fails(
        cloud, strict, start_emulator, run_inventory, warnings, monkeypatch):
    # Pages of 5, as the API's own maximum would be on a big fleet.
    monkeypatch.setattr(ADAPTER_MODULES[cloud], "PAGE_SIZE", 5)
    emulator = start_emulator(cloud, count=24, stopped_share=0.0)
    broken, healthy = CLOUDS[cloud]["regions"]
    action = CLOUDS[cloud]["list_action"]
    emulator.faults.fail_page(broken, action, 2)
    config = plugin_config(cloud, emulator, hostnames=["instance_id"], gpu_only=False, strict_regions=strict)
    inventory, message = inventory_or_refusal(run_inventory, config, strict)
    if inventory is not None:
        listed = hosts(inventory)
        assert set(listed) == {i["instance_id"] for i in emulator.instances[healthy]}
        (message,) = [w for w in warnings if "region %s failed" % broken in w]
        assert "its hosts are not in this inventory" in message
    assert "%s page 2 failed" % action in message and UNAVAILABLE[cloud] in message


def test_an_empty_region_gives_no_warning(cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    full, empty = CLOUDS[cloud]["regions"]
    seeded = emulator.seed(fleet.generate(emulator.CATALOG, [full], 4, stopped_share=0.0))
    listed = hosts(run_inventory(plugin_config(cloud, emulator, hostnames=["instance_id"], gpu_only=False)))
    assert set(listed) == {i["instance_id"] for i in seeded}
    # Not a failed region, not a warning: an empty region is fine.
    assert warnings == []


def test_duplicate_names_stay_distinct_hosts(cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    first, second = CLOUDS[cloud]["regions"]
    seeded = seed(emulator, [{"region": first, "name": "gpu-twin"}, {"region": first, "name": "gpu-twin"},
                             {"region": second, "name": "gpu-twin"}])
    ids = {i["instance_id"] for i in seeded}
    # The first host (by region, then instance id) gets the name; the
    # others fall through to the next entry, their instance id.
    listed = hosts(run_inventory(plugin_config(cloud, emulator, hostnames=["name", "instance_id"])))
    assert len(listed) == 3
    assert {v["gpufleet_instance_id"] for v in listed.values()} == ids
    named = listed.pop("gpu-twin")
    assert named["gpufleet_instance_id"] == min(ids, key=lambda i: (
        next(s["region"] for s in seeded if s["instance_id"] == i), i))
    assert set(listed) == ids - {named["gpufleet_instance_id"]}
    assert all(v["gpufleet_name"] == "gpu-twin" for v in listed.values())
    assert warnings == []


def test_duplicate_names_with_nothing_to_fall_back_to_are_named_in_warnings(
        cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    seeded = seed(emulator, [{"region": region, "name": "gpu-twin"}, {"region": region, "name": "gpu-twin"}])
    listed = hosts(run_inventory(plugin_config(cloud, emulator, hostnames=["name"])))
    (kept,) = [v["gpufleet_instance_id"] for v in listed.values()]
    (left_out,) = {i["instance_id"] for i in seeded} - {kept}
    (said,) = [w for w in warnings if left_out in w]
    assert "it is left out" in said and "another host" in said


def test_odd_tags_are_kept_and_give_valid_group_names(cloud, start_emulator, run_inventory, warnings):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    (inst,) = seed(emulator, [{"region": region, "name": "odd", "tags": dict(ODD_TAGS)}])
    config = plugin_config(cloud, emulator, hostnames=["instance_id"],
                           keyed_groups=[{"key": "gpufleet_tags", "prefix": "tag"}],
                           groups={"ml ops.team": "gpufleet_tags['team name'] == 'ml ops'"})
    inventory = run_inventory(config)
    variables = hosts(inventory)[inst["instance_id"]]
    tags = dict(variables["gpufleet_tags"])
    if cloud == "aws":
        assert tags.pop("Name") == "odd"
    assert tags == ODD_TAGS
    for name in inventory.groups:
        assert not C.INVALID_VARIABLE_NAMES.findall(name), name
    host = inventory.get_host(inst["instance_id"])
    for group in ("tag_team_name_ml_ops", "tag_k8s_io_role_gpu_worker", "tag_cost_center_a_b_c",
                  "tag_团队_机器学习", "tag_Ünïcode_välue", "tag_expr_a_b_c_d", "tag_empty_", "ml_ops_team"):
        assert host in inventory.groups[group].get_hosts(), group
    assert not any("nvalid characters" in w for w in warnings)
