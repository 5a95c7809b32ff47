"""Over real SSH, the security role refuses settings that would lock out the
login Ansible is using, before it changes anything; with the lab's settings
it converges and the same login keeps working.

The node is reached the way the lab reaches its nodes: sshd published on a
loopback address of this machine, a key login as `gpufleet` with sudo, and
podman masquerading the connection from its bridge gateway 10.88.0.1."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from gpufleet.lab import _PROVISION, _nodes, _ssh
from tests.integration.conftest import node_container
from tests.integration.helpers import assert_refused_before_any_change
from tests.support.nodes import node_exec, recap, run_playbook
from tests.support.ports import free_port

pytestmark = pytest.mark.lab

ADDRESS = "127.0.0.231"
PLAY = """
- hosts: all
  become: true
  gather_facts: true
  roles:
    - gpufleet.cloud.security
"""
LAB_SETTINGS = {
    "security_ssh_allowed_cidrs": ["10.88.0.1/32"],
    "security_monitoring_cidrs": ["10.88.0.1/32"],
    "security_ssh_allow_groups": ["sudo", "gpufleet"],
}


@pytest.fixture(scope="module")
def ssh_node(tmp_path_factory):
    """A node with sshd published on ADDRESS, the lab user and key, a
    known_hosts file, and an inventory that reaches it over SSH."""
    work = tmp_path_factory.mktemp("ssh-node")
    key = _ssh.ensure_key(work)
    port = free_port(ADDRESS)
    # NET_ADMIN in the node's own network namespace, as lab nodes have it.
    with node_container("--cap-add", "NET_ADMIN", "--publish", f"{ADDRESS}:{port}:22") as name:
        node = _nodes.Node(index=0, name=name, hostname=name, address=ADDRESS, port=port)
        subprocess.run(
            ["podman", "exec", "-i", name, "sh", "-c", _PROVISION],
            input=key.with_suffix(".pub").read_text(), text=True, check=True, capture_output=True,
        )
        # sshd's host keys are made at first boot, which a busy machine
        # finishes well after systemd says the node is up: wait for the key.
        host_key = ""
        deadline = time.monotonic() + 120
        while not host_key.strip() and time.monotonic() < deadline:
            host_key = node_exec(name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").stdout
            if not host_key.strip():
                time.sleep(1)
        (work / "known_hosts").write_text(_ssh.known_hosts_line(node, host_key) + "\n")
        _ssh.wait_for_banner(node, timeout=60)
        (work / "hosts.yml").write_text(
            f"""all:
  hosts:
    ssh-node:
      ansible_host: {ADDRESS}
      ansible_port: {port}
      ansible_user: gpufleet
      ansible_ssh_private_key_file: {key}
      ansible_ssh_common_args: -o UserKnownHostsFile={work / 'known_hosts'} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes
"""
        )
        (work / "play.yml").write_text(PLAY)
        yield name, work, port


def converge(work, extra_vars: dict) -> subprocess.CompletedProcess:
    return run_playbook("-i", str(work / "hosts.yml"), "-e", json.dumps(extra_vars), str(work / "play.yml"))


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"security_ssh_allow_groups": ["sudo"]}, 'security_ssh_allow_groups ["sudo"] has none of the login\'s groups'),
        ({"security_ssh_allowed_cidrs": ["192.168.0.0/16"]}, 'security_ssh_allowed_cidrs ["192.168.0.0/16"]'),
    ],
    ids=["login group not allowed", "login source not allowed"],
)
def test_settings_that_would_lock_out_the_login_are_refused(ssh_node, override, reason):
    name, work = ssh_node[:2]
    result = converge(work, {**LAB_SETTINGS, **override})
    out = assert_refused_before_any_change(result, "ssh-node", reason)
    assert "would lock out Ansible's own SSH login as gpufleet from 10.88.0.1" in out, out
    assert node_exec(name, "test", "-e", "/etc/ssh/sshd_config.d/00-gpufleet-security.conf").returncode == 1


def test_the_lab_settings_converge_and_keep_the_login(ssh_node):
    name, work, port = ssh_node
    first = converge(work, LAB_SETTINGS)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr
    assert recap(first.stdout)["ssh-node"]["changed"] > 0
    assert "policy drop" in node_exec(name, "nft", "list", "table", "inet", "gpufleet").stdout
    # A new SSH login (no shared connection) through the firewall and the
    # hardened sshd.
    login = subprocess.run(
        ["ssh", "-p", str(port), "-i", str(work / "id_ed25519"), "-o", f"UserKnownHostsFile={work / 'known_hosts'}",
         "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none",
         "-o", "BatchMode=yes", f"gpufleet@{ADDRESS}", "id", "-un"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert (login.returncode, login.stdout.strip()) == (0, "gpufleet"), login.stderr
    second = converge(work, LAB_SETTINGS)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr
    stats = recap(second.stdout)["ssh-node"]
    assert (stats["changed"], stats["unreachable"], stats["failed"]) == (0, 0, 0), second.stdout[-4000:]
