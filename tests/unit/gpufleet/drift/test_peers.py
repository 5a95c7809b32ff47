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


def test_peers_share_an_os_release_and_the_roles_applied():
    # A mixed fleet of two kinds, each with its odd node out: Debian 12
    # nodes without GPUs and Debian 13 GPU nodes. Across kinds, the
    # differences are by design; within a kind, the odd node is flagged.
    plain = {"os": "Debian 12", "groups": ["lab"]}
    gpu = {"os": "Debian 13", "groups": ["lab"]}
    fleet = {
        "p1": {**plain, "versions": {"chrony": "4.3"}}, "p2": {**plain, "versions": {"chrony": "4.3"}},
        "p3": {**plain, "versions": {"chrony": "4.2"}},
        "g1": {**gpu, "versions": {"chrony": "4.6", "libnccl2": "2.22"}},
        "g2": {**gpu, "versions": {"chrony": "4.6", "libnccl2": "2.22"}},
        "g3": {**gpu, "versions": {"chrony": "4.6", "libnccl2": "2.21"}},
    }
    roles = {**{h: {"baseline"} for h in ("p1", "p2", "p3")}, **{h: {"baseline", "nccl"} for h in ("g1", "g2", "g3")}}
    assert [(f["host"], f["message"]) for f in _peers.compare(fleet, roles)] == [
        ("g3", "libnccl2 2.21 on 1 of 3 nodes, others 2.22"), ("p3", "chrony 4.2 on 1 of 3 nodes, others 4.3")]
    # The same release, other roles: not peers either.
    same_os = {h: {**meta, "os": "Debian 12"} for h, meta in fleet.items()}
    assert {f["host"] for f in _peers.compare(same_os, roles)} == {"g3", "p3"}
    # Without the roles (another kind each), the releases still split them.
    assert {f["host"] for f in _peers.compare(fleet)} == {"g3", "p3"}
