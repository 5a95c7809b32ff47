"""The ip_network and ip_in_networks Jinja tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[4] / "plugins" / "test" / "network.py"
_spec = importlib.util.spec_from_file_location("gpufleet_test_network", PATH)
network = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(network)


@pytest.mark.parametrize("value", ["10.0.0.0/8", "10.231.1.0/30", "192.0.2.7", "0.0.0.0/0", "fd00:231:1::/64", "::1", "::/0"])
def test_valid_networks(value):
    assert network.ip_network(value)


@pytest.mark.parametrize(
    "value",
    ["10.0.0.300/8", "10.0.0.7/8", "10.0.0.0/33", "fd00::1/64", "not-a-cidr", "", " 10.0.0.0/8", "10.0.0.0/8 ", 8, None, ["10.0.0.0/8"]],
)
def test_invalid_networks(value):
    assert not network.ip_network(value)


def test_ip_in_networks():
    nets = ["10.88.0.1/32", "fd00:231:1::/64", "garbage"]
    assert network.ip_in_networks("10.88.0.1", nets)
    assert network.ip_in_networks("fd00:231:1::2", nets)
    assert not network.ip_in_networks("10.88.0.2", nets)
    assert not network.ip_in_networks("fd00:231:2::2", nets)
    assert not network.ip_in_networks("not-an-ip", nets)
    assert not network.ip_in_networks("10.88.0.1", [])


def test_registered_as_jinja_tests():
    assert set(network.TestModule().tests()) == {"ip_network", "ip_in_networks"}
