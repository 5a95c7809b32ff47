from __future__ import annotations

import pytest

from gpufleet.lab import _nodes


def test_plan_gives_each_node_its_own_loopback_address_and_port():
    nodes = _nodes.plan(3)
    assert [n.name for n in nodes] == ["gpufleet-lab-1", "gpufleet-lab-2", "gpufleet-lab-3"]
    assert [n.endpoint for n in nodes] == ["127.0.0.11:2201", "127.0.0.12:2202", "127.0.0.13:2203"]
    assert len({n.address for n in nodes}) == 3
    assert all(n.address.startswith("127.") for n in nodes)


def test_plan_stays_inside_loopback_at_the_maximum():
    last = _nodes.plan(_nodes.MAX_NODES)[-1]
    assert last.address == "127.0.0.210"


@pytest.mark.parametrize("bad", [0, -1, _nodes.MAX_NODES + 1])
def test_plan_rejects_out_of_range_counts(bad):
    with pytest.raises(ValueError, match="nodes: must be between 1 and"):
        _nodes.plan(bad)


@pytest.mark.parametrize("bad", ["3", 2.5, True, None])
def test_plan_rejects_non_integers(bad):
    with pytest.raises(ValueError, match="nodes: expected a whole number"):
        _nodes.plan(bad)


def test_index_of_round_trips_and_ignores_foreign_names():
    assert _nodes.index_of(_nodes.node(7).name) == 7
    assert _nodes.index_of("some-other-container") is None
    assert _nodes.index_of("gpufleet-lab-x") is None


def test_image_for_names_the_bad_release():
    assert _nodes.image_for("13") == "localhost/gpufleet-debian:13"
    with pytest.raises(ValueError, match="debian: must be one of 12, 13, got '11'"):
        _nodes.image_for("11")


def test_plan_makes_the_first_nodes_gpu_stack_nodes_and_the_last_spot_ones():
    assert [n.gpu_stack for n in _nodes.plan(4, gpu_stack=2)] == [True, True, False, False]
    assert [n.spot for n in _nodes.plan(4, gpu_stack=2, spot=3)] == [False, True, True, True]
    assert not any(n.gpu_stack or n.spot for n in _nodes.plan(2))


@pytest.mark.parametrize("option", ["gpu_stack", "spot"])
@pytest.mark.parametrize("bad", [-1, 3, True, "1"])
def test_plan_rejects_bad_counts_naming_the_option(option, bad):
    with pytest.raises(ValueError, match=f"^{option}: "):
        _nodes.plan(2, **{option: bad})


def test_gpu_stack_nodes_run_debian_13_whatever_the_lab_release():
    assert _nodes.image_for("12", gpu_stack=True) == "localhost/gpufleet-debian:13"
