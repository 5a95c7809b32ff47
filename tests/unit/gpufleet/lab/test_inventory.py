"""The inventory `gpufleet lab up` writes into the lab directory: the
collection's inventories/lab, pointed at that lab directory's key and
known_hosts, as Ansible itself resolves its variables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpufleet.lab import _inventory

ROOT = Path(__file__).resolve().parents[4]
SOURCE = ROOT / "inventories" / "lab"


def host_vars(inventory: Path, host: str = "lab-node-1") -> dict:
    """The templated connection variables of `host` in group lab, read by
    Ansible from a static hosts file beside the written group_vars (the
    inventory's own aliyun_ecs.yml would need the lab's emulator)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    hosts = inventory / "hosts.ini"
    hosts.write_text(f"[lab]\n{host}\n")
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(hosts)])
    variables = VariableManager(loader=loader, inventory=manager).get_vars(host=manager.get_host(host))
    templar = Templar(loader=loader, variables=variables)
    names = ("ansible_ssh_private_key_file", "ansible_ssh_common_args", "ansible_user", "baseline_ntp_servers")
    return {k: templar.template(variables[k]) for k in names}


def test_the_written_inventory_points_at_its_lab_dir(tmp_path):
    lab = tmp_path / "somewhere" / "lab"
    lab.mkdir(parents=True)
    written = _inventory.write(lab, SOURCE)
    assert written == lab / "inventory"
    assert (written / "aliyun_ecs.yml").read_text() == (SOURCE / "aliyun_ecs.yml").read_text()
    got = host_vars(written)
    assert got["ansible_ssh_private_key_file"] == f"{lab}/id_ed25519"
    assert f"-o UserKnownHostsFile={lab}/known_hosts" in got["ansible_ssh_common_args"]
    # Everything else is inventories/lab's own.
    assert "StrictHostKeyChecking=yes" in got["ansible_ssh_common_args"]
    assert got["ansible_user"] == "gpufleet" and got["baseline_ntp_servers"] == ["127.0.0.1"]


def test_the_checkouts_inventory_still_finds_the_checkouts_lab(tmp_path):
    copy = tmp_path / "checkout" / "inventories" / "lab"
    shutil.copytree(SOURCE, copy)
    got = host_vars(copy)
    assert Path(got["ansible_ssh_private_key_file"]).resolve() == (tmp_path / "checkout" / ".lab" / "id_ed25519")


def test_rewriting_drops_what_the_last_source_had(tmp_path):
    old = tmp_path / "old"
    shutil.copytree(SOURCE, old)
    (old / "group_vars" / "gone.yml").write_text("---\nx: 1\n")
    _inventory.write(tmp_path / "lab", old)
    _inventory.write(tmp_path / "lab", SOURCE)
    assert not (tmp_path / "lab" / "inventory" / "group_vars" / "gone.yml").exists()


def test_a_source_that_is_not_the_lab_inventory_is_refused_naming_it(tmp_path):
    with pytest.raises(RuntimeError, match=f"{tmp_path} is not the lab inventory"):
        _inventory.write(tmp_path / "lab", tmp_path)
