"""The container_node test: one list of container types for every role."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.test import node

container_node = node.container_node


@pytest.mark.parametrize("kind", ["container", "docker", "podman", "lxc", "systemd-nspawn", "containerd"])
def test_container_types_are_containers(kind):
    assert container_node({"virtualization_type": kind}) is True


@pytest.mark.parametrize("kind", ["kvm", "xen", "VirtualBox", "NA", "", None])
def test_machines_and_unknown_types_are_not(kind):
    # "NA" is what Ansible reports on bare metal.
    assert container_node({"virtualization_type": kind}) is False


@pytest.mark.parametrize("facts", [{}, {"os_family": "Debian"}, None, "docker"])
def test_facts_without_the_virtual_subset_are_an_error_not_a_no(facts):
    with pytest.raises(ValueError, match="gather the 'virtual' fact subset first"):
        container_node(facts)


def test_the_test_is_registered_under_its_documented_name():
    assert node.TestModule().tests() == {"container_node": container_node}
