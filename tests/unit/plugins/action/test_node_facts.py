"""gpufleet.cloud.node_facts in a real ansible-playbook run against this
machine (a local connection): what it reads, that a second call in the
same run answers from the facts without reading the node again (its GPU
counts following a later read of the GPUs), that check mode adds the
installed packages, and that it reads the node view of GPU faults
(plugin_utils/_node_doctor.py has that view's own tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cloud.plugins.action import node_facts
from ansible_collections.gpufleet.cloud.plugins.test.node import CONTAINER_TYPES

ROOT = Path(__file__).resolve().parents[4]

PLAY = """
- name: Node facts, as the roles' preflights read them
  hosts: local
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: First read
      gpufleet.cloud.node_facts:
        health_report_path: "{{ playbook_dir }}/report.json"
        repairs_path: "{{ playbook_dir }}/repairs.json"
    - name: Second read
      gpufleet.cloud.node_facts:
    - name: Show what the play sees
      ansible.builtin.debug:
        msg: "{{ ansible_facts.gpufleet_node }}"
    # As nvidia_driver's gpu_facts after it loaded the driver: GPUs now run.
    - name: Read the GPUs again
      fake_gpu_facts:
    - name: Third read
      gpufleet.cloud.node_facts:
    # As a step that installed packages reads them again.
    - name: Packages only
      gpufleet.cloud.node_facts:
        packages_only: true
    - name: Packages only, not a boolean
      gpufleet.cloud.node_facts:
        packages_only: maybe
      ignore_errors: true
    # What node_facts reads from dpkg must be what package_facts reads
    # through apt.
    - name: Read the packages as package_facts does
      ansible.builtin.package_facts:
        manager: apt
      when: ansible_check_mode
"""

# Answers like gpufleet.cloud.gpu_facts on a node whose driver runs one GPU
# (with its control device, so it counts in a container too).
FAKE_GPU_FACTS = """#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule(argument_spec={}, supports_check_mode=True)
module.exit_json(changed=False, ansible_facts={"gpu": {
    "count": 1, "gpus": [], "pci_gpus": ["0000:01:00.0"], "pci_nvswitches": [],
    "driver_gpus": ["0000:01:00.0"], "control_device": True, "loaded_module_version": "580.95.05"}})
"""


# node_health's report with a tripped XID 79 (roles/node_health/files/gpufleet-health.py).
HEALTH_REPORT = {"time": "2026-12-01T06:00:00.123+00:00", "status": "fail", "checks": [], "faults": [
    {"kind": "xid", "code": 79, "pci": "0000:3b:00.0", "class": "RESTART_BM", "step": "reboot", "threshold": 1,
     "window_minutes": 60, "detail": "GPU has fallen off the bus", "count": 1, "undated": 0, "last": 1764568800.0,
     "tripped": True}]}


# package_facts needs Debian's apt bindings, which the nodes' python3 has
# and a virtual environment does not.
NODE_PYTHON = "/usr/bin/python3"
HAS_APT = subprocess.run([NODE_PYTHON, "-c", "import apt"], capture_output=True, check=False).returncode == 0 \
    if os.path.exists(NODE_PYTHON) else False


def run(tmp_path, *args):
    local = {"ansible_connection": "local", "ansible_python_interpreter": NODE_PYTHON if HAS_APT else sys.executable,
             # As a group_vars file may give it: templated as the play reads it.
             "gpufleet_gpu": {"count": "{{ 1 + 1 }}"}}
    (tmp_path / "inventory.json").write_text(json.dumps({"all": {"hosts": {"local": local}}}))
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "report.json").write_text(json.dumps(HEALTH_REPORT))
    if "--check" in args:
        (tmp_path / "repairs.json").mkdir()  # there, and not a file that reads
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "fake_gpu_facts.py").write_text(FAKE_GPU_FACTS)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.json"),
                           str(tmp_path / "play.yml"), *args], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path, check=False)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert done.returncode == 0, done.stdout[-3000:]
    return {task["task"]["name"]: task["hosts"]["local"] for task in report["plays"][0]["tasks"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    modes = (("run", ()), ("check", ("--check",))) if HAS_APT else (("run", ()),)
    return {mode: run(tmp_path_factory.mktemp(mode), *args) for mode, args in modes}


def needs(runs, mode):
    if mode not in runs:
        pytest.skip(f"no {NODE_PYTHON} with Debian's apt bindings here: check mode reads the packages through them")


@pytest.mark.parametrize("mode", ["run", "check"])
def test_the_first_call_reads_the_node(runs, mode):
    needs(runs, mode)
    first = runs[mode]["First read"]
    node = first["ansible_facts"]["gpufleet_node"]
    assert not first.get("changed") and not first.get("failed"), first
    assert set(node) == {"facts_epoch", "container", "gpus", "has_gpus", "rdma_ports", "rdma_devices", "doctor"}
    # This machine has no GPU and no RDMA device: none, not unknown. The
    # inventory promises two, so it is a GPU node (the driver may come later).
    assert node["gpus"] == {"driver": 0, "bus": 0, "inventory": 2} and node["has_gpus"] is True
    assert node["rdma_ports"] == [] and node["rdma_devices"] == []
    # The setup facts come as setup names them (ansible_*); the play reads
    # them without the prefix.
    facts = first["ansible_facts"]
    assert node["container"] == (facts["ansible_virtualization_type"] in CONTAINER_TYPES)
    assert "ansible_all_ipv4_addresses" in facts and "gpu" in facts
    assert ("packages" in facts) == (mode == "check"), sorted(facts)


@pytest.mark.parametrize("mode", ["run", "check"])
def test_the_first_call_reads_the_node_view_of_gpu_faults_and_never_fails_on_it(runs, mode):
    needs(runs, mode)
    doctor = runs[mode]["First read"]["ansible_facts"]["gpufleet_node"]["doctor"]
    assert doctor["health"]["state"] == "read" and doctor["health"]["status"] == "fail"
    assert [(f["code"], f["class"], f["tripped"]) for f in doctor["health"]["faults"]] == [(79, "RESTART_BM", True)]
    # No file: the guard's repair is off there. A directory: not a file that reads.
    want = "absent" if mode == "run" else "unreadable"
    assert doctor["repairs"]["state"] == want and "repairs.json" in doctor["repairs"]["detail"], doctor["repairs"]


@pytest.mark.parametrize("mode", ["run", "check"])
def test_a_later_call_in_the_same_run_does_not_read_the_node_again(runs, mode):
    needs(runs, mode)
    second = runs[mode]["Second read"]
    assert second.get("msg") == "read earlier in this run" and "ansible_facts" not in second, second
    shown = runs[mode]["Show what the play sees"]["msg"]
    assert shown == runs[mode]["First read"]["ansible_facts"]["gpufleet_node"]


@pytest.mark.parametrize("mode", ["run", "check"])
def test_the_gpu_counts_follow_a_later_read_of_the_gpus(runs, mode):
    needs(runs, mode)
    third = runs[mode]["Third read"]
    assert third.get("msg") == "read earlier in this run", third
    node = third["ansible_facts"]["gpufleet_node"]
    assert node["gpus"] == {"driver": 1, "bus": 1, "inventory": 2} and node["has_gpus"] is True, node
    # Only the GPUs change: the rest is what the first call read.
    first = runs[mode]["First read"]["ansible_facts"]["gpufleet_node"]
    assert {k: v for k, v in node.items() if k not in ("gpus", "has_gpus")} == {
        k: v for k, v in first.items() if k not in ("gpus", "has_gpus")}


NO_GPU = {"driver_gpus": [], "pci_gpus": [], "control_device": False}
ON_BUS = {"driver_gpus": [], "pci_gpus": ["0000:01:00.0"], "control_device": False}
RUNNING = {"driver_gpus": ["0000:01:00.0"], "pci_gpus": ["0000:01:00.0"], "control_device": False}


@pytest.mark.parametrize("gpu, container, inventory, group, has", [
    (NO_GPU, False, None, False, False),  # nothing says GPUs; unknown is not a yes
    (NO_GPU, False, 0, False, False),
    (NO_GPU, False, 8, False, True),  # the inventory says so; no driver yet
    (NO_GPU, False, 0.25, False, True),  # a vGPU share is a GPU node
    (NO_GPU, False, None, True, True),  # the gpu group
    (ON_BUS, False, None, False, True),  # on the bus, no driver yet (gpu_unknown)
    (ON_BUS, True, None, False, False),  # a container sees its host's bus
    (RUNNING, True, None, False, False),  # and its host's /proc/driver
    (dict(RUNNING, control_device=True), True, None, False, True),  # unless given the GPU
])
def test_one_decision_of_whether_a_node_has_gpus(gpu, container, inventory, group, has):
    facets = node_facts.gpu_facets(gpu, container, inventory, group)
    assert facets["has_gpus"] is has
    assert facets["gpus"]["inventory"] == inventory and facets["gpus"]["bus"] == len(gpu["pci_gpus"])


@pytest.mark.parametrize("gpufleet_gpu, count", [
    ({"count": 8}, 8), ({"count": "0.25"}, 0.25), ({"count": None}, None), ({}, None), (None, None),
    ({"count": "many"}, None), ("8", None),
])
def test_the_inventory_count_is_a_number_or_unknown(gpufleet_gpu, count):
    assert node_facts.inventory_gpus(gpufleet_gpu) == count


def test_in_check_mode_the_packages_are_what_package_facts_reads(runs):
    needs(runs, "check")
    ours = runs["check"]["First read"]["ansible_facts"]["packages"]
    theirs = runs["check"]["Read the packages as package_facts does"]["ansible_facts"]["packages"]
    assert len(ours) > 50 and sorted(ours) == sorted(theirs)
    for name, entries in theirs.items():
        want = sorted((e["name"], e["version"], e["arch"]) for e in entries)
        assert sorted((e["name"], e["version"], e["arch"]) for e in ours[name]) == want, name
    assert {e["source"] for entries in ours.values() for e in entries} == {"dpkg"}


@pytest.mark.parametrize("mode", ["run", "check"])
def test_packages_only_reads_the_packages_now_and_nothing_else(runs, mode):
    needs(runs, mode)
    only = runs[mode]["Packages only"]
    # In a run too, though the node was read earlier in it.
    assert set(only["ansible_facts"]) == {"packages"} and not only.get("changed"), sorted(only["ansible_facts"])
    assert only["ansible_facts"]["packages"]["dpkg"][0]["source"] == "dpkg"
    if mode == "check":
        assert only["ansible_facts"]["packages"] == runs[mode]["First read"]["ansible_facts"]["packages"]


def test_a_packages_only_that_is_not_a_boolean_is_refused_by_name(runs):
    refused = runs["run"]["Packages only, not a boolean"]
    assert refused.get("failed") and "packages_only" in refused["msg"] and "maybe" in refused["msg"], refused
