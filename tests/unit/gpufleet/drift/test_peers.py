from __future__ import annotations

from gpufleet.drift import _peers


def hosts(versions_by_host, groups=("gpu_h100",)):
    return {h: {"groups": list(groups), "versions": v} for h, v in versions_by_host.items()}


def test_the_odd_node_out_is_flagged_with_the_majority_value():
    fleet = hosts({f"n{i}": {"nvidia-driver": "535.216"} for i in range(11)} | {"n11": {"nvidia-driver": "535.183"}})
    flags = _peers.compare(fleet)
    assert [(f["host"], f["message"]) for f in flags] == [
        ("n11", "nvidia-driver 535.183 on 1 of 12 nodes, others 535.216")]


def test_identical_peers_raise_nothing_and_single_node_groups_are_skipped():
    assert _peers.compare(hosts({"a": {"kernel": "6.1"}, "b": {"kernel": "6.1"}})) == []
    assert _peers.compare(hosts({"a": {"kernel": "6.1"}})) == []


def test_a_missing_package_is_a_difference():
    flags = _peers.compare(hosts({"a": {"docker.io": "20.10"}, "b": {"docker.io": "20.10"}, "c": {}}))
    assert [(f["host"], f["value"]) for f in flags] == [("c", "absent")]


def test_a_host_is_flagged_once_even_when_in_several_groups():
    fleet = {h: {"groups": ["lab", "region_x"], "versions": {"kernel": k}}
             for h, k in (("a", "6.1"), ("b", "6.1"), ("c", "6.2"))}
    assert len(_peers.compare(fleet)) == 1
