"""The roles' structural input checks as filters (plugins/filter/inputs.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cloud.plugins.filter import inputs as f


def test_only_options_with_bad_networks_are_named_with_those_entries_in_order():
    lists = {"a": ["10.0.0.0/8", "10.0.0.1/8", "fd00::/8", "example.org"], "b": ["192.0.2.7"], "c": [], "d": None}
    assert f.invalid_by_option(lists, "network") == {"a": ["10.0.0.1/8", "example.org"]}
    # Spaces around an address are not trimmed into a valid one; nor is a number an address.
    assert f.invalid_by_option({"x": [" 10.0.0.0/8", 10]}, "network") == {"x": [" 10.0.0.0/8", 10]}


def test_ports_are_read_as_jinjas_int_and_named_below_the_range_then_above():
    ports = {"p": [22, "9100", 0, 70000, "ssh", -1, 65535, 1, "8080.0"], "ok": [443]}
    assert f.invalid_by_option(ports, "port") == {"p": [0, 0, -1, 70000]}


def test_an_unknown_kind_is_an_error_that_names_the_kinds():
    with pytest.raises(AnsibleFilterError, match="kind must be one of network, port, not 'cidr'"):
        f.invalid_by_option({"a": []}, "cidr")


def test_kernel_parameter_names():
    params = {"vm.swappiness": 10, "net.ipv4.conf.all.arp_ignore": 1, "net/core/somaxconn": 4096,
              "swappiness": 1, "VM.swappiness": 1, "vm.": 1, 7: 1, "kernel.sched_*": 1}
    assert f.sysctl_invalid_names(params) == ["swappiness", "VM.swappiness", "vm.", 7]
    assert f.sysctl_invalid_names({}) == [] and f.sysctl_invalid_names(None) == []


def test_kernel_parameter_values_that_are_not_plain_come_first_by_type_then_by_text():
    params = {"a.b": "4096 87380 16777216", "c.d": "x\ny", "e.f": [1], "g.h": 1.5, "i.j": "$(reboot)",
              "k.l": None, "m.n": True, "o.p": "/proc/x:1-2"}
    assert f.sysctl_invalid_values(params) == ["e.f", "k.l", "c.d", "i.j"]


def test_every_filter_is_exported():
    assert set(f.FilterModule().filters()) == {"fault_policy_problems", "invalid_by_option", "sysctl_invalid_names",
                                               "sysctl_invalid_values", "repair_class_problems"}


def test_fault_policy_problems_name_each_bad_entry_of_either_policy():
    """The preflight's filter is the node check's own validation
    (_gpu_faults.policy_problems, tested there entry by entry)."""
    fault_policy_problems = f.FilterModule().filters()["fault_policy_problems"]
    assert fault_policy_problems({"RESTART_APP": {"threshold": 5}}, {79: {"class": "IGNORE"}}) == []
    problems = fault_policy_problems({"RESET_GPU": {"threshold": 0}}, {"79": {"class": "REBOOT"}})
    assert [p.split(" ", 1)[0] for p in problems] == ["node_health_fault_policy.RESET_GPU.threshold",
                                                      "node_health_xid_policy.79.class:"]


def test_repair_class_problems_name_each_class_without_a_step_or_unknown():
    repair_class_problems = f.FilterModule().filters()["repair_class_problems"]
    assert repair_class_problems([]) == [] and repair_class_problems(["RESTART_APP", "RESTART_VM"]) == []
    problems = repair_class_problems(["RESET_GPU", "IGNORE", "REBOOT", "WORKFLOW_XID_45"])
    assert [p.split(":", 1)[1].split(" ")[1] for p in problems] == ["IGNORE", "'REBOOT'", "WORKFLOW_XID_45"]
    assert "the classes with one: RESTART_APP, CHECK_UVM, RESET_GPU" in problems[0]
    assert repair_class_problems("RESTART_APP") == [
        "guard_repair_classes must be a list of classes (got 'RESTART_APP')"]
