"""The four plugins: each one lists its cloud's emulator into the same
variables and groups; each documents the options it reads."""

from __future__ import annotations

import pytest
import yaml
from ansible.plugins.loader import inventory_loader

from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_record import RECORD_KEYS
from tests.emulators import fleet
from tests.unit.plugins.conftest import CLOUDS, PLUGINS, plugin_config
from tests.unit.plugins.module_utils.test_discovery_clouds import SHARES

pytestmark = pytest.mark.parametrize("cloud", sorted(CLOUDS))


def test_the_plugin_lists_its_cloud_with_the_shared_variables_and_groups(cloud, start_emulator, run_inventory):
    emulator = start_emulator(cloud, count=12, stopped_share=0.0)
    seeded = [i for region in emulator.instances.values() for i in region]
    gpu_ids = {i["instance_id"] for i in seeded if i["instance_type"] in _gpu_types(cloud, emulator)}
    inventory = run_inventory(plugin_config(cloud, emulator, hostnames=["instance_id"]))
    listed = {h.name for h in inventory.groups["all"].get_hosts()}
    assert listed == gpu_ids
    assert {h.name for h in inventory.groups["cloud_" + cloud].get_hosts()} == gpu_ids
    for name in listed:
        variables = inventory.get_host(name).get_vars()
        assert {k for k in variables if k.startswith("gpufleet_")} == {"gpufleet_" + k for k in RECORD_KEYS}
        model = variables["gpufleet_gpu"]["model"]
        assert inventory.get_host(name) in inventory.groups["gpu_" + model.lower()].get_hosts()
        assert ("spot" in inventory.groups and inventory.get_host(name) in inventory.groups["spot"].get_hosts()) \
            is variables["gpufleet_spot"]


def test_only_its_own_config_files_are_claimed(cloud, tmp_path):
    plugin = inventory_loader.get("gpufleet.cloud." + PLUGINS[cloud])
    for name, claimed in (("prod.%s.yml" % PLUGINS[cloud], True), ("%s.yaml" % PLUGINS[cloud], True),
                          ("prod.yml", False), ("%s.json" % PLUGINS[cloud], False)):
        path = tmp_path / name
        path.write_text("plugin: gpufleet.cloud.%s\n" % PLUGINS[cloud])
        assert plugin.verify_file(str(path)) is claimed, name


def test_every_option_read_is_documented(cloud):
    plugin = inventory_loader.get("gpufleet.cloud." + PLUGINS[cloud])
    module = __import__(type(plugin).__module__, fromlist=["DOCUMENTATION"])
    options = yaml.safe_load(module.DOCUMENTATION)["options"]
    read = set(plugin.CREDENTIAL_OPTIONS) | set(plugin.EXTRA_OPTIONS) | {"plugin", "endpoint"}
    assert read <= set(options)
    assert set(CLOUDS[cloud]["credentials"]) <= set(plugin.CREDENTIAL_OPTIONS)
    examples = list(yaml.safe_load_all(module.EXAMPLES))
    assert examples and all(e["plugin"] == "gpufleet.cloud." + PLUGINS[cloud] for e in examples)


def test_types_the_lookup_does_not_know_lose_no_instance(cloud, start_emulator, run_inventory, warnings):
    # Every type of the first region unknown to its lookup: EC2 refuses the
    # call, the others leave the types out of their answers.
    emulator = start_emulator(cloud, count=16, stopped_share=0.0)
    region = CLOUDS[cloud]["regions"][0]
    seeded = [i for r in emulator.instances.values() for i in r]
    emulator.faults.unoffered_types[region] = {i["instance_type"] for i in seeded}
    inventory = run_inventory(plugin_config(cloud, emulator, hostnames=["instance_id"], gpu_only=False))
    assert {h.name for h in inventory.groups["all"].get_hosts()} == {i["instance_id"] for i in seeded}
    unknown = set()
    for host in inventory.groups["all"].get_hosts():
        variables = host.get_vars()
        gpu, source = variables["gpufleet_gpu"], variables["gpufleet_gpu_source"]
        # Unknown is null, never 0, and only ever where the lookup was refused.
        assert (gpu["count"] is None) is (source == "unknown"), (host.name, gpu, source)
        if source == "unknown":
            assert variables["gpufleet_region"] == region
            unknown.add(host.name)
    grouped = {h.name for h in inventory.groups["gpu_unknown"].get_hosts()} if "gpu_unknown" in inventory.groups else set()
    assert grouped == unknown
    if cloud == "aws":
        # An EC2 instance carries no GPU data of its own: each of the
        # region's has the built-in catalogue's where it lists the type
        # (every GPU type of the emulator's), else unknown (the CPU type).
        from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue
        in_region = [i for i in seeded if i["region"] == region]
        assert unknown == {i["instance_id"] for i in in_region if not _gpu_catalogue.lookup(cloud, i["instance_type"])}
        for inst in in_region:
            variables = inventory.get_host(inst["instance_id"]).get_vars()
            if inst["instance_id"] not in unknown:
                assert variables["gpufleet_gpu_source"] == "catalogue"
                assert variables["gpufleet_gpu"] == _gpu_catalogue.lookup(cloud, inst["instance_type"])
    assert not any("failed" in w and "region %s failed" % region in w for w in warnings)


def _gpu_types(cloud, emulator):
    return {t for t in emulator.CATALOG if fleet.has_gpu(emulator.CATALOG[t], t)}


def test_a_hollow_listing_reply_fails_its_region_never_empties_it(cloud, start_emulator, run_inventory, warnings):
    # HTTP 200 with the cloud's envelope and no listing fields (a Tencent
    # body with neither InstanceSet nor TotalCount, say).
    emulator = start_emulator(cloud, count=12, stopped_share=0.0)
    first, second = CLOUDS[cloud]["regions"]
    emulator.faults.hollow.add((first, CLOUDS[cloud]["list_action"]))
    inventory = run_inventory(plugin_config(cloud, emulator, hostnames=["instance_id"], gpu_only=False))
    regions = {h.get_vars()["gpufleet_region"] for h in inventory.groups["all"].get_hosts()}
    assert first not in regions
    failed = [w for w in warnings if "region %s failed" % first in w]
    assert len(failed) == 1 and "answered without" in failed[0] and "not read as empty" in failed[0]
    if emulator.instances.get(second):
        assert second in regions


def test_gpu_fields_missing_keep_the_host_with_catalogue_or_unknown_gpus(
        cloud, start_emulator, run_inventory, warnings):
    from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue
    from tests.unit.plugins.module_utils.test_discovery_clouds import CATALOGUED, TYPE_ACTION

    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    listed, unlisted = CATALOGUED[cloud]
    seeded = emulator.seed([{"region": region, "instance_type": t, "name": "node-%d" % i}
                            for i, t in enumerate((listed, unlisted))])
    for action in (CLOUDS[cloud]["list_action"], TYPE_ACTION[cloud]):
        emulator.faults.gpu_fields_missing.add((region, action))
    inventory = run_inventory(plugin_config(cloud, emulator, hostnames=["instance_id"]))
    ids = {i["instance_type"]: i["instance_id"] for i in seeded}
    # gpu_only (the default) keeps both: one from the catalogue, one unknown.
    assert {h.name for h in inventory.groups["all"].get_hosts()} == set(ids.values())
    catalogued = inventory.get_host(ids[listed]).get_vars()
    gpu = _gpu_catalogue.lookup(cloud, listed)
    assert catalogued["gpufleet_gpu"] == gpu and catalogued["gpufleet_gpu_source"] == "catalogue"
    assert inventory.get_host(ids[listed]) in inventory.groups["gpu_" + gpu["model"].lower()].get_hosts()
    unknown = inventory.get_host(ids[unlisted]).get_vars()
    assert unknown["gpufleet_gpu"]["count"] is None and unknown["gpufleet_gpu_source"] == "unknown"
    assert {h.name for h in inventory.groups["gpu_unknown"].get_hosts()} == {ids[unlisted]}
    assert any(ids[listed] in w and "catalogue" in w for w in warnings), warnings
    assert any(ids[unlisted] in w and "unknown" in w for w in warnings), warnings


# A type with one whole GPU, beside each cloud's share.
WHOLE = {"tencent": "GN7.2XLARGE32", "aliyun": "ecs.gn7i-c8g1.2xlarge", "huawei": "pi2.2xlarge.4", "aws": "g5.2xlarge"}


def test_a_share_of_a_gpu_is_a_gpu_host_in_the_gpu_share_group(cloud, start_emulator, run_inventory):
    emulator = start_emulator(cloud)
    region = CLOUDS[cloud]["regions"][0]
    instance_type, gpu = SHARES[cloud]
    [share, whole] = emulator.seed([{"region": region, "instance_type": instance_type},
                                    {"region": region, "instance_type": WHOLE[cloud]}])
    inventory = run_inventory(plugin_config(
        cloud, emulator, hostnames=["instance_id"],
        keyed_groups=[{"key": "gpufleet_gpu.count | string", "prefix": "gpus"}],
        groups={"whole_gpus": "gpufleet_gpu.count is not none and gpufleet_gpu.count >= 1"}))
    host = inventory.get_host(share["instance_id"])
    count = host.get_vars()["gpufleet_gpu"]["count"]
    # Kept by gpu_only, as the number it is: a float, never int 0 or 1.
    assert count == gpu["count"] and isinstance(count, float)
    assert host in inventory.groups["gpu_" + gpu["model"].lower()].get_hosts()
    # The fixed group gpu_share holds the share and not the whole GPU.
    assert [h.name for h in inventory.groups["gpu_share"].get_hosts()] == [share["instance_id"]]
    assert [h.name for h in inventory.groups["whole_gpus"].get_hosts()] == [whole["instance_id"]]
    # Keyed by count: one group for the share's number, one for the whole
    # GPU's, and no other.
    whole_count = inventory.get_host(whole["instance_id"]).get_vars()["gpufleet_gpu"]["count"]
    keyed = sorted(g for g in inventory.groups if g.startswith("gpus_"))
    assert keyed == sorted("gpus_" + str(c).replace(".", "_") for c in (gpu["count"], whole_count)), keyed
