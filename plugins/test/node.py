# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Jinja tests about the node itself, from its gathered facts. The roles
that must behave differently in a container (no kernel of its own: no
sysctl, no modules, no driver, no reboot) ask this one test instead of each
keeping its own list of container types. Documentation is in the .yml file
of the test's name."""

from __future__ import annotations

# Values of ansible_facts.virtualization_type (Ansible's own virtual facts)
# that mean "a container sharing its host's kernel".
CONTAINER_TYPES = frozenset(("container", "docker", "podman", "lxc", "systemd-nspawn", "containerd"))


def container_node(facts) -> bool:
    """True when the gathered facts say the node is a container. Facts
    without virtualization_type (the virtual subset not gathered) are an
    error, not "no": a container taken for a machine would get a reboot."""
    if not isinstance(facts, dict) or "virtualization_type" not in facts:
        raise ValueError("gpufleet.cloud.container_node needs ansible_facts with virtualization_type: "
                         "gather the 'virtual' fact subset first")
    return facts["virtualization_type"] in CONTAINER_TYPES


class TestModule:
    def tests(self):
        return {"container_node": container_node}
