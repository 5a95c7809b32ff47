"""The inventory base, through the Alibaba Cloud plugin and its emulator
(the base is the same for all four plugins): hosts, groups, hostnames,
filters, constructed options, cache, failed regions, bad configuration."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleError, AnsibleParserError

from tests.unit.plugins.conftest import plugin_config

SEED = [
    {"region": "cn-hangzhou", "instance_type": "ecs.gn7i-c8g1.2xlarge", "instance_id": "i-a10", "name": "a10-1",
     "private_ip": "10.0.0.1", "public_ip": "47.0.0.1", "tags": {"team": "ml", "env": "prod"}},
    {"region": "cn-hangzhou", "instance_type": "ecs.gn8v-8x.48xlarge", "instance_id": "i-h20", "name": "h20-1",
     "private_ip": "10.0.0.2", "charge": "spot", "tags": {"team": "infra", "env": "dev"}},
    {"region": "cn-hangzhou", "instance_type": "ecs.ebmgn7ex.32xlarge", "instance_id": "i-a100", "name": "a100-1",
     "private_ip": "10.0.0.3", "state": "stopped", "tags": {"team": "ml"}},
    {"region": "cn-hangzhou", "instance_type": "ecs.g7.xlarge", "instance_id": "i-cpu", "name": "cpu-1",
     "private_ip": "10.0.0.4", "tags": {"team": "ml"}},
    # Same private address as i-a10, other region: both must stay listed.
    {"region": "cn-beijing", "instance_type": "ecs.gn6v-c8g1.2xlarge", "instance_id": "i-v100", "name": "v100-1",
     "private_ip": "10.0.0.1", "tags": {"team": "research", "note": "{{ 7 * 6 }}"}},
]


@pytest.fixture
def aliyun(start_emulator):
    emulator = start_emulator("aliyun")
    emulator.seed(SEED)
    return emulator


def hosts(inventory, group="all"):
    return sorted(h.name for h in inventory.groups[group].get_hosts())


def hostvars(inventory, host):
    return inventory.get_host(host).get_vars()


def test_hosts_carry_the_record_as_gpufleet_variables(aliyun, run_inventory):
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"]))
    assert hosts(inventory) == ["i-a10", "i-a100", "i-h20", "i-v100"]
    h20 = hostvars(inventory, "i-h20")
    assert h20["gpufleet_provider"] == "aliyun" and h20["gpufleet_region"] == "cn-hangzhou"
    assert h20["gpufleet_gpu"] == {"model": "H20", "count": 8, "memory_mib": 98304}
    assert h20["gpufleet_spot"] is True and h20["gpufleet_charge_type"] == "spot"
    assert h20["gpufleet_rdma"] == "erdma" and h20["gpufleet_tags"] == {"team": "infra", "env": "dev"}
    assert sorted(k for k in h20 if k.startswith("gpufleet_")) == sorted(
        "gpufleet_" + k for k in ("provider", "region", "zone", "instance_id", "instance_type", "name", "state",
                                  "private_ip", "public_ip", "gpu", "gpu_source", "spot", "charge_type", "tags",
                                  "rdma"))
    assert h20["gpufleet_gpu_source"] == "api"


def test_fixed_groups(aliyun, run_inventory):
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"]))
    assert hosts(inventory, "cloud_aliyun") == ["i-a10", "i-a100", "i-h20", "i-v100"]
    assert hosts(inventory, "region_cn_hangzhou") == ["i-a10", "i-a100", "i-h20"]
    assert hosts(inventory, "region_cn_beijing") == ["i-v100"]
    assert hosts(inventory, "gpu_a10") == ["i-a10"]
    assert hosts(inventory, "gpu_a100") == ["i-a100"]
    assert hosts(inventory, "gpu_h20") == ["i-h20"]
    assert hosts(inventory, "gpu_v100") == ["i-v100"]
    assert hosts(inventory, "spot") == ["i-h20"]


def test_hostnames_follow_the_preference_list(aliyun, run_inventory):
    by_address = run_inventory(plugin_config("aliyun", aliyun))
    # Default [private_ip, instance_id]. Records come in region order, so
    # cn-beijing's i-v100 takes 10.0.0.1 and cn-hangzhou's i-a10, which has
    # the same address, falls back to its instance id.
    assert hosts(by_address) == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "i-a10"]
    assert hostvars(by_address, "10.0.0.1")["gpufleet_instance_id"] == "i-v100"

    by_tag = run_inventory(plugin_config("aliyun", aliyun, hostnames=["tag:team", "name"]))
    assert hosts(by_tag) == ["a100-1", "infra", "ml", "research"]

    by_public = run_inventory(plugin_config("aliyun", aliyun, hostnames=["public_ip", "name"]))
    assert hosts(by_public) == ["47.0.0.1", "a100-1", "h20-1", "v100-1"]


def test_an_instance_without_a_usable_hostname_is_left_out_with_a_warning(aliyun, run_inventory, warnings):
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["public_ip"]))
    assert hosts(inventory) == ["47.0.0.1"]
    assert len(warnings) == 3
    assert all("has no hostname from public_ip" in w for w in warnings)


def test_filters_on_state_tags_and_gpu(aliyun, run_inventory):
    def listed(**filters):
        return hosts(run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"], **filters)))

    assert listed(filters={"state": ["stopped"]}) == ["i-a100"]
    assert listed(filters={"tags": {"team": "ml"}}) == ["i-a10", "i-a100"]
    assert listed(filters={"tags": {"team": ["infra", "research"]}}) == ["i-h20", "i-v100"]
    assert listed(filters={"tags": {"env": None}}) == ["i-a10", "i-h20"]
    assert listed(gpu_only=False) == ["i-a10", "i-a100", "i-cpu", "i-h20", "i-v100"]


def test_constructed_compose_groups_and_keyed_groups(aliyun, run_inventory):
    inventory = run_inventory(plugin_config(
        "aliyun", aliyun, hostnames=["instance_id"],
        compose={"ansible_host": "gpufleet_private_ip", "gpus": "gpufleet_gpu.count"},
        groups={"big": "gpufleet_gpu.count >= 8"},
        keyed_groups=[{"key": "gpufleet_rdma", "prefix": "rdma"}, {"key": "gpufleet_tags.team", "prefix": "team"}],
    ))
    assert hostvars(inventory, "i-v100")["ansible_host"] == "10.0.0.1"
    assert hostvars(inventory, "i-a100")["gpus"] == 8
    assert hosts(inventory, "big") == ["i-a100", "i-h20"]
    assert hosts(inventory, "rdma_erdma") == ["i-a100", "i-h20"]
    assert hosts(inventory, "rdma_none") == ["i-a10", "i-v100"]
    assert hosts(inventory, "team_ml") == ["i-a10", "i-a100"]


def test_strict_makes_a_bad_expression_fail(aliyun, run_inventory):
    lenient = plugin_config("aliyun", aliyun, compose={"x": "gpufleet_no_such_var.y"})
    assert "x" not in hostvars(run_inventory(lenient), "10.0.0.2")
    with pytest.raises(AnsibleError, match="Could not set x"):
        run_inventory(dict(lenient, strict=True))


def test_api_values_are_never_templated(aliyun, run_inventory):
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"],
                                            compose={"note": "gpufleet_tags.note"}))
    assert hostvars(inventory, "i-v100")["note"] == "{{ 7 * 6 }}"
    assert hostvars(inventory, "i-v100")["gpufleet_tags"]["note"] == "{{ 7 * 6 }}"


def cached(aliyun, tmp_path, **options):
    return plugin_config("aliyun", aliyun, cache=True, cache_plugin="ansible.builtin.jsonfile",
                         cache_connection=str(tmp_path / "cache"), **options)


def test_a_cache_hit_makes_no_api_call(aliyun, run_inventory, tmp_path):
    config = cached(aliyun, tmp_path)
    first = run_inventory(config)
    calls = len(aliyun.calls)
    assert calls > 0
    # With the API gone altogether, the cached inventory is still served.
    aliyun.stop()
    second = run_inventory(config)
    assert len(aliyun.calls) == calls
    assert hosts(second) == hosts(first)
    assert hostvars(second, "10.0.0.2") == hostvars(first, "10.0.0.2")


def test_a_refresh_goes_to_the_api_again(aliyun, run_inventory, tmp_path):
    config = cached(aliyun, tmp_path)
    run_inventory(config)
    calls = len(aliyun.calls)
    run_inventory(config, cache=False)
    assert len(aliyun.calls) > calls


def test_a_partial_result_is_never_cached(aliyun, run_inventory, tmp_path, warnings):
    config = cached(aliyun, tmp_path)
    aliyun.faults.failed_regions.add("cn-beijing")
    assert hosts(run_inventory(config)) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    aliyun.faults.failed_regions.clear()
    calls = len(aliyun.calls)
    assert hosts(run_inventory(config)) == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "i-a10"]
    assert len(aliyun.calls) > calls


def test_a_failed_region_is_a_warning_naming_region_and_error(aliyun, run_inventory, warnings):
    aliyun.faults.failed_regions.add("cn-beijing")
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"]))
    assert hosts(inventory) == ["i-a10", "i-a100", "i-h20"]
    assert len(warnings) == 1
    assert "region cn-beijing failed" in warnings[0] and "ServiceUnavailable" in warnings[0]


def test_strict_regions_fails_on_a_failed_region(aliyun, run_inventory):
    aliyun.faults.failed_regions.add("cn-beijing")
    with pytest.raises(AnsibleError, match="region cn-beijing failed.*ServiceUnavailable.*strict_regions is on"):
        run_inventory(plugin_config("aliyun", aliyun, strict_regions=True))


def test_every_region_failing_fails_the_inventory(aliyun, run_inventory, warnings):
    aliyun.faults.failed_regions.update(["cn-beijing", "cn-hangzhou"])
    with pytest.raises(AnsibleError, match="every region failed"):
        run_inventory(plugin_config("aliyun", aliyun))


def test_throttling_is_retried_inside_the_plugin(aliyun, run_inventory, warnings):
    aliyun.faults.throttle(2, region="cn-hangzhou", action="DescribeInstances")
    inventory = run_inventory(plugin_config("aliyun", aliyun, hostnames=["instance_id"]))
    assert hosts(inventory) == ["i-a10", "i-a100", "i-h20", "i-v100"] and warnings == []


@pytest.mark.parametrize("options, error, message", [
    # An unknown option (Ansible itself would ignore it).
    ({"regoins": ["cn-hangzhou"]}, AnsibleParserError, "unknown option 'regoins' \\(did you mean 'regions'\\?\\)"),
    # A bad region name.
    ({"regions": ["cn_hangzhou"]}, AnsibleParserError, "option 'regions': 'cn_hangzhou' is not a valid aliyun region"),
    # Wrong types.
    ({"workers": "many"}, AnsibleParserError, "^gpufleet.cloud.aliyun_ecs: option 'workers': expected an integer, got 'many'$"),
    ({"timeout": "soon"}, AnsibleParserError, "^gpufleet.cloud.aliyun_ecs: option 'timeout': expected a number, got 'soon'$"),
    ({"regions": {"cn-hangzhou": 1}}, AnsibleParserError, "option 'regions': expected a list, got"),
    ({"strict_regions": "maybe"}, AnsibleParserError, "option 'strict_regions': expected true or false"),
    ({"filters": ["running"]}, AnsibleParserError, "option 'filters': expected a mapping, got"),
    # Values of the right type that make no sense.
    ({"workers": 0}, AnsibleParserError, "option 'workers': must be at least 1"),
    ({"filters": {"state": ["up"]}}, AnsibleParserError, "option 'filters': filters.state: 'up' is not a state"),
    ({"hostnames": ["ip"]}, AnsibleParserError, "option 'hostnames': 'ip' is neither a record field"),
    ({"endpoint": "http://127.0.0.1:1/path"}, AnsibleParserError, "option 'endpoint'"),
    ({"access_key_secret": None}, AnsibleParserError, "option 'access_key_secret': access_key_id and access_key_secret"),
])
def test_bad_configuration_names_the_option(aliyun, run_inventory, options, error, message):
    with pytest.raises(error, match=message):
        run_inventory(plugin_config("aliyun", aliyun, **options))


def test_missing_credentials_say_how_to_provide_them(aliyun, run_inventory):
    config = plugin_config("aliyun", aliyun)
    del config["access_key_id"], config["access_key_secret"]
    with pytest.raises(AnsibleError, match="no Alibaba Cloud credentials: set the access_key_id and access_key_secret"):
        run_inventory(config)
    assert aliyun.calls == []


def test_cores_without_their_own_trust_handling_get_wrapped_values(monkeypatch):
    from ansible.plugins.loader import inventory_loader

    from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_record import make_record
    from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _gpu_inventory

    wrapped = []
    monkeypatch.setattr(_gpu_inventory, "wrap_var", lambda value: wrapped.append(value) or value)
    plugin = inventory_loader.get("gpufleet.cloud.aliyun_ecs")
    record = make_record("aliyun", "cn-hangzhou", "i-1")
    # ansible-core 2.19+: the inventory itself untrusts what this plugin sets.
    assert plugin.trusted_by_default is False
    plugin._unsafe(record)  # pylint: disable=protected-access
    assert wrapped == []
    # Older cores have no trusted_by_default: the plugin wraps the values.
    monkeypatch.setattr(plugin, "trusted_by_default", None)
    plugin._unsafe(record)  # pylint: disable=protected-access
    assert wrapped == [record]


def test_records_carry_plain_strings_into_the_cache(aliyun, run_inventory, tmp_path):
    # Region names come from the config file as tagged, trusted strings;
    # records (and so the cache and host variables) must hold plain ones.
    config = cached(aliyun, tmp_path)
    run_inventory(config)
    entry = next((tmp_path / "cache").iterdir()).read_text()
    assert "cn-hangzhou" in entry
    assert "TrustedAsTemplate" not in entry and "__ansible_type" not in entry
