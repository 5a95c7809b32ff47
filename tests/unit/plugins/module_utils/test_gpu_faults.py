"""plugins/module_utils/_gpu_faults.py: the decision table of the node
doctor's classification. Each class of NVIDIA's XID catalogue, threshold
and window edges, user overrides, and inputs it does not know."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_faults as faults

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
PCI = "0000:3b:00"


def xid(code, minutes_ago=0.0, pci=PCI):
    return {"kind": "xid", "code": code, "pci": pci, "time": None if minutes_ago is None else NOW - minutes_ago * 60}


def one(events, classes=None, codes=None):
    (fault,) = faults.classify(events, NOW, classes, codes)
    return fault


# One code per class, as NVIDIA's catalogue (r590) gives its immediate action.
CATALOGUE = [
    (13, "RESTART_APP", "restart_app"),     # graphics engine exception
    (31, "RESTART_APP", "restart_app"),     # MMU fault
    (94, "RESTART_APP", "restart_app"),     # contained ECC error
    (159, "CHECK_UVM", "restart_app"),
    (43, "IGNORE", "none"),                 # reset channel verification
    (63, "IGNORE", "none"),                 # row remapping event
    (92, "IGNORE", "none"),                 # excessive single-bit errors
    (46, "RESET_GPU", "reset_gpu"),         # GPU stopped processing
    (95, "RESET_GPU", "reset_gpu"),         # uncontained ECC error
    (119, "RESET_GPU", "reset_gpu"),        # GSP RPC timeout
    (140, "RESET_GPU", "reset_gpu"),        # unrecovered ECC error
    (48, "WORKFLOW_XID_48", "reset_gpu"),   # double-bit ECC error
    (74, "WORKFLOW_NVLINK_ERR", "reset_gpu"),
    (145, "WORKFLOW_NVLINK5_ERR", "reset_gpu"),
    (79, "RESTART_BM", "reboot"),           # fallen off the bus
    (151, "RESTART_VM", "reboot"),          # key rotation error
    (54, "CHECK_MECHANICALS", "replace"),   # power-reduced clocking
    (61, "CONTACT_SUPPORT", "replace"),     # PMU breakpoint
    (1, "CONTACT_SUPPORT", "replace"),      # unused code
    (78, "UPDATE_SWFW", "none"),            # vGPU start error
    (45, "WORKFLOW_XID_45", "none"),        # preemptive cleanup after another XID
]


@pytest.mark.parametrize("code,klass,step", CATALOGUE, ids=[f"xid{c}" for c, _k, _s in CATALOGUE])
def test_each_catalogue_class_and_its_first_step(code, klass, step):
    fault = one([xid(code)])
    assert (fault["class"], fault["step"]) == (klass, step)
    assert fault["tripped"] is (fault["threshold"] <= 1)


def test_every_code_of_the_catalogue_has_a_class_but_154():
    assert set(faults.XID_CATALOGUE) == set(range(1, faults.CATALOGUE_LAST + 1)) - {154}
    assert set(faults.XID_CATALOGUE.values()) == set(faults.CLASSES)
    assert set(faults.DEFAULT_POLICY) == set(faults.CLASS_STEPS) == set(faults.CLASSES)


@pytest.mark.parametrize("code", [154, 163, 999, 0])
def test_an_unknown_code_is_visible_and_never_tripped(code):
    """Codes past the catalogue, and 154 (whose action is another XID's),
    are reported with every line counted, and never lead to an action,
    even with a policy that would trip anything."""
    fault = one([xid(code, m) for m in (0, 1, 600, None)], classes={"RESET_GPU": {"threshold": 1}},
                codes={code: {"threshold": 1}} if code else None)
    assert fault["class"] == faults.UNKNOWN and fault["step"] == "none"
    assert fault["count"] == 4 and fault["undated"] == 1 and fault["tripped"] is False


def test_an_unknown_kind_is_unknown():
    fault = one([{"kind": "psu_smoke", "code": None, "pci": "", "time": NOW}])
    assert (fault["class"], fault["tripped"]) == (faults.UNKNOWN, False)


def test_the_faults_without_a_code():
    missing = one([{"kind": "gpu_missing", "code": None, "pci": "", "time": NOW}])
    assert (missing["class"], missing["step"], missing["tripped"]) == ("RESTART_VM", "reboot", True)
    ecc = one([{"kind": "ecc_uncorrectable", "code": None, "pci": PCI, "time": NOW}])
    assert (ecc["class"], ecc["step"], ecc["tripped"]) == ("RESET_GPU", "reset_gpu", True)


@pytest.mark.parametrize("count,tripped", [(2, False), (3, True), (4, True)])
def test_threshold_edges(count, tripped):
    # RESTART_APP: 3 within 60 minutes by default.
    fault = one([xid(13, minute) for minute in range(count)])
    assert (fault["count"], fault["tripped"]) == (count, tripped)


@pytest.mark.parametrize("minutes_ago,counted", [(59.9, True), (60, True), (60.1, False), (24 * 60, False)])
def test_window_edges(minutes_ago, counted):
    fault = one([xid(79, minutes_ago)])
    assert (fault["count"], fault["tripped"]) == ((1, True) if counted else (0, False))
    if not counted:
        assert fault["last"] is None  # nothing within the window


def test_an_undated_line_counts_in_every_window():
    fault = one([xid(46, None)])
    assert (fault["count"], fault["undated"], fault["tripped"]) == (1, 1, True)


def test_each_gpu_and_code_is_its_own_fault():
    found = faults.classify([xid(79), xid(79, pci="0000:5e:00"), xid(13), xid(13), xid(13)], NOW)
    assert [(f["code"], f["pci"], f["count"], f["tripped"]) for f in found] == [
        (13, PCI, 3, True), (79, PCI, 1, True), (79, "0000:5e:00", 1, True)]


def test_the_users_class_policy_overrides_the_default():
    events = [xid(13, m) for m in (1, 2, 3)]
    assert one(events)["tripped"] is True
    fault = one(events, classes={"RESTART_APP": {"threshold": 5}})
    assert (fault["threshold"], fault["window_minutes"], fault["tripped"]) == (5, 60, False)
    fault = one([xid(79, 30)], classes={"RESTART_BM": {"window_minutes": 10}})
    assert (fault["count"], fault["tripped"]) == (0, False)


def test_the_users_code_policy_overrides_its_class():
    """Per code: a class of its own (an application code made IGNORE), or
    another threshold and window; keys from YAML (int) or JSON (str)."""
    assert one([xid(13) for _repeat in range(5)], codes={13: {"class": "IGNORE"}})["step"] == "none"
    fault = one([xid(79, 1)], codes={"79": {"threshold": 2}})
    assert (fault["class"], fault["threshold"], fault["tripped"]) == ("RESTART_BM", 2, False)
    fault = one([xid(79, 1), xid(79, 2)], classes={"RESTART_BM": {"threshold": 5}}, codes={79: {"threshold": 2}})
    assert fault["tripped"] is True
    # A code policy for another code leaves this one alone.
    assert one([xid(79)], codes={48: {"threshold": 9}})["threshold"] == 1


def test_the_longest_window_is_read():
    assert faults.longest_window() == 60
    assert faults.longest_window({"RESET_GPU": {"window_minutes": 240}}, {79: {"window_minutes": 90}}) == 240
    assert faults.longest_window({}, {79: {"window_minutes": 90}}) == 90


# ---- kernel log lines -------------------------------------------------------

BOOT = 1_799_990_000.0


@pytest.mark.parametrize("line,when", [
    # journalctl -o short-unix
    (f"{NOW - 30:.6f} gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
     "GPU has fallen off the bus.", NOW - 30),
    # dmesg: seconds since boot
    ("[ 9970.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", BOOT + 9970.123456),
    # syslog's kern.log, RFC 3339
    ("2027-01-15T07:59:30.000000+00:00 gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, "
     "GPU has fallen off the bus.", NOW - 30),
    ("2027-01-15T15:59:30+08:00 gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
     NOW - 30),
    # no time at all (journalctl -o cat)
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", None),
    # an older driver's address, without PCI:
    ("NVRM: Xid (0000:3b:00): 79, GPU has fallen off the bus.", None),
])
def test_each_log_format_gives_the_line_its_time(line, when):
    (event,) = faults.xid_events(line + "\nkernel: eth0: link up\n", BOOT)
    assert (event["code"], event["pci"]) == (79, PCI)
    assert event["time"] == pytest.approx(when) if when else event["time"] is None


def test_dmesg_without_a_boot_time_is_undated():
    (event,) = faults.xid_events("[  12.5] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE", None)
    assert event["time"] is None


def test_a_syslog_time_without_an_offset_is_the_nodes_local_time():
    (event,) = faults.xid_events("2027-01-15T07:59:30 gpu-1 kernel: NVRM: Xid (PCI:0000:3b:00): 48, DBE")
    local = datetime.datetime(2027, 1, 15, 7, 59, 30).astimezone().timestamp()
    assert event["time"] == pytest.approx(local)


# ---- the policy's own checks ----------------------------------------------------

@pytest.mark.parametrize("classes,codes,says", [
    ({"RESTART_APPS": {}}, {}, "node_health_fault_policy.RESTART_APPS: 'RESTART_APPS' is not a class"),
    ({"RESET_GPU": {"threshold": 0}}, {}, "node_health_fault_policy.RESET_GPU.threshold must be a whole number from 1"),
    ({"RESET_GPU": {"window_minutes": "60"}}, {}, "node_health_fault_policy.RESET_GPU.window_minutes must be"),
    ({"RESET_GPU": {"threshold": True}}, {}, "node_health_fault_policy.RESET_GPU.threshold must be"),
    ({"RESET_GPU": {"limit": 3}}, {}, "node_health_fault_policy.RESET_GPU: 'limit' is not one of"),
    ({"RESET_GPU": 3}, {}, "node_health_fault_policy.RESET_GPU must be a dictionary"),
    ({}, {"xid79": {}}, "node_health_xid_policy.xid79: 'xid79' is not an XID code"),
    ({}, {0: {}}, "node_health_xid_policy.0: 0 is not an XID code"),
    ({}, {79: {"class": "REBOOT"}}, "node_health_xid_policy.79.class: 'REBOOT' is not a class"),
    ({}, {79: {"threshold": -1}}, "node_health_xid_policy.79.threshold must be a whole number from 1"),
    ([], {}, "node_health_fault_policy must be a dictionary"),
    ({}, "79", "node_health_xid_policy must be a dictionary"),
])
def test_each_policy_problem_is_named(classes, codes, says):
    problems = faults.policy_problems(classes, codes)
    assert len(problems) == 1 and problems[0].startswith(says), problems


def test_a_valid_policy_has_no_problem():
    assert faults.policy_problems({"RESTART_APP": {"threshold": 5, "window_minutes": 30}, "IGNORE": {}},
                                  {13: {"class": "IGNORE"}, "79": {"threshold": 2, "window_minutes": 10}}) == []


# ---- NVSwitch (SXid) lines and row remaps ------------------------------------------

SXID_LOG = """\
1733520000.100000 gpu-1 kernel: nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 34 sourcetrack timeout error (First)
1733520001.200000 gpu-1 kernel: nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)
1733520002.300000 gpu-1 kernel: nvidia-nvswitch0: SXid (PCI:0000:08:00.0): 20034, Severe, Link 30 LTSSM Fault Up
1733520003.400000 gpu-1 kernel: nvidia-nvswitch1: SXid (0000:06:00.0): 11012
1733520004.500000 gpu-1 kernel: NVRM: Xid (PCI:0000:18:00): 74, pid=1, NVLink: fatal error detected on link 3
"""


def test_each_sxid_line_is_a_fault_of_its_severity():
    events = faults.sxid_events(SXID_LOG)
    assert [(e["kind"], e["code"], e["pci"], e["time"]) for e in events] == [
        ("sxid_fatal", 24007, "0000:07:00.0", 1733520000.1),
        ("sxid_non_fatal", 12028, "0000:05:00.0", 1733520001.2),
        # A severity word the driver does not write, and none at all: unknown.
        ("sxid", 20034, "0000:08:00.0", 1733520002.3),
        ("sxid", 11012, "0000:06:00.0", 1733520003.4),
    ]
    # The GPU's XID line is not an SXid, nor the SXid lines XIDs.
    assert [e["code"] for e in faults.xid_events(SXID_LOG)] == [74]


def test_sxid_and_row_remap_classes():
    now = 1733520010.0
    found = {f["kind"]: f for f in faults.classify(
        [dict(e) for e in faults.sxid_events(SXID_LOG)[:3]]
        + [{"kind": "row_remap_pending", "code": None, "pci": "00000000:18:00.0", "time": now},
           {"kind": "row_remap_failure", "code": None, "pci": "00000000:19:00.0", "time": now},
           {"kind": "row_remap_unreadable", "code": None, "pci": "", "time": now}], now)}
    rows = {kind: (f["class"], f["step"], f["tripped"]) for kind, f in found.items()}
    assert rows == {
        "sxid_fatal": ("RESTART_VM", "reboot", True),
        "sxid_non_fatal": ("IGNORE", "none", True),
        "sxid": ("unknown", "none", False),
        "row_remap_pending": ("RESET_GPU", "reset_gpu", True),
        "row_remap_failure": ("CONTACT_SUPPORT", "replace", True),
        "row_remap_unreadable": ("unknown", "none", False),
    }
    # A class policy reaches them as it reaches an XID of the class.
    (fatal,) = faults.classify(faults.sxid_events(SXID_LOG)[:1], now, {"RESTART_VM": {"threshold": 2}})
    assert (fatal["threshold"], fatal["tripped"]) == (2, False)
