"""The drift callback against fake task results: what it records, how it
keys loop items, and that no_log content never reaches the report."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ansible.playbook.handler import Handler
from ansible.plugins.loader import callback_loader


class FakeGroup:
    def __init__(self, name):
        self._name = name

    def get_name(self):
        return self._name


class FakeHost:
    def __init__(self, name, hostvars=None, groups=("lab",)):
        self._name = name
        self.vars = hostvars or {}
        self._groups = [FakeGroup(g) for g in ("all", *groups)]

    def get_name(self):
        return self._name

    def get_groups(self):
        return self._groups


class FakeRole:
    """What the callback reads of a Role: its name, and the roles that
    include it (Ansible's Role.get_parents)."""

    def __init__(self, name, parents=()):
        self._name = name
        self._parents = list(parents)

    def get_name(self):
        return self._name

    def get_parents(self):
        return self._parents


class FakeTask:
    def __init__(self, name, action, no_log=False, role=None, tags=(), parents=()):
        self._name = name
        self.action = action
        self.no_log = no_log
        self.tags = list(tags)
        self._role = FakeRole(role, parents) if role else None

    def get_name(self):
        return f"{self._role.get_name()} : {self._name}" if self._role else self._name


def result(host, task, res):
    return SimpleNamespace(_host=host, _task=task, _result=res)


@pytest.fixture
def cb(tmp_path):
    # Loaded through Ansible's plugin loader, so the options come from the
    # plugin's own DOCUMENTATION exactly as in a real run.
    plugin = callback_loader.get("gpufleet.cloud.drift")
    assert plugin is not None, "gpufleet.cloud.drift is not found by the plugin loader"
    plugin.set_options(direct={"report_path": str(tmp_path / "out" / "drift.json"),
                               "packages": ["chrony", "nvidia-driver"]})
    return plugin


def finish(cb, tmp_path, hosts=()):
    cb.v2_playbook_on_stats(SimpleNamespace(processed={h: {} for h in hosts}))
    return json.loads((tmp_path / "out" / "drift.json").read_text())


def test_records_each_state_with_role_and_exit_code(cb, tmp_path):
    h = FakeHost("n1", {"gpufleet_provider": "aliyun", "gpufleet_region": "cn-beijing",
                        "gpufleet_gpu": {"model": "H100", "count": 8}})
    tpl = FakeTask("Configure chrony", "ansible.builtin.template", role="gpufleet.cloud.baseline")
    cb.v2_runner_on_ok(result(h, tpl, {"changed": True, "diff": [{"before": "a", "after": "b"}]}))
    cb.v2_runner_on_ok(result(h, FakeTask("Install", "ansible.builtin.apt", role="gpufleet.cloud.baseline"),
                              {"changed": False}))
    cb.v2_runner_on_ok(result(h, FakeTask("Check", "ansible.builtin.assert"), {"changed": False}))
    report = finish(cb, tmp_path, ["n1"])
    states = {r["resource"]: r["state"] for r in report["records"]}
    assert states == {"gpufleet.cloud.baseline : Configure chrony": "drifted",
                      "gpufleet.cloud.baseline : Install": "in-sync"}
    drifted = next(r for r in report["records"] if r["state"] == "drifted")
    assert drifted["role"] == "gpufleet.cloud.baseline"
    assert drifted["diff"] == [{"before": "a", "after": "b"}]
    assert report["hosts"]["n1"]["provider"] == "aliyun"
    assert report["hosts"]["n1"]["gpu_model"] == "H100"
    assert report["exit_code"] == 2


def test_loop_items_are_separate_resources_and_the_aggregate_is_ignored(cb, tmp_path):
    h = FakeHost("n1")
    t = FakeTask("Write sysctl", "ansible.posix.sysctl", role="baseline")
    cb.v2_runner_item_on_ok(result(h, t, {"changed": False, "item": {"key": "a"}, "_ansible_item_label": "a"}))
    cb.v2_runner_item_on_ok(result(h, t, {"changed": True, "item": {"key": "b"}, "_ansible_item_label": "b"}))
    cb.v2_runner_on_ok(result(h, t, {"changed": True, "results": [{}, {}]}))
    report = finish(cb, tmp_path)
    assert [(r["resource"], r["state"]) for r in report["records"]] == [
        ("baseline : Write sysctl [a]", "in-sync"),
        ("baseline : Write sysctl [b]", "drifted"),
    ]


def test_no_log_diff_item_and_message_are_redacted(cb, tmp_path):
    h = FakeHost("n1")
    t = FakeTask("Write key", "ansible.builtin.copy", no_log=True)
    cb.v2_runner_item_on_ok(result(h, t, {"changed": True, "item": "hunter2", "_ansible_item_label": "hunter2",
                                          "diff": [{"before": "old-hunter2", "after": "new-hunter2"}]}))
    cb.v2_runner_on_failed(result(h, FakeTask("Use key", "ansible.builtin.command", no_log=True),
                                  {"msg": "bad key hunter2"}))
    text = (finish(cb, tmp_path), (tmp_path / "out" / "drift.json").read_text())[1]
    assert "hunter2" not in text
    assert "<redacted: no_log>" in text


def test_unreachable_and_ignored_tags(cb, tmp_path):
    h = FakeHost("n1")
    cb.v2_runner_on_unreachable(result(h, FakeTask("Gathering Facts", "ansible.builtin.gather_facts"),
                                       {"msg": "ssh: connect to host refused"}))
    cb.v2_runner_on_ok(result(FakeHost("n2"), FakeTask("Refresh", "ansible.builtin.apt",
                                                       tags=["gpufleet_drift_ignore"]), {"changed": False}))
    report = finish(cb, tmp_path, ["n1", "n2"])
    assert [(r["host"], r["state"]) for r in report["records"]] == [("n1", "unreachable")]
    assert report["exit_code"] == 8
    assert "n2" in report["hosts"]


def test_handlers_are_not_resources(cb, tmp_path):
    handler = Handler()
    handler.name = "Restart chrony"
    handler.action = "ansible.builtin.systemd_service"
    cb.v2_runner_on_ok(result(FakeHost("n1"), handler, {"changed": True}))
    assert finish(cb, tmp_path)["records"] == []


def test_versions_are_collected_for_peer_comparison(cb, tmp_path):
    h = FakeHost("n1")
    cb.v2_runner_on_ok(result(h, FakeTask("Read kernel", "ansible.builtin.setup"),
                              {"ansible_facts": {"ansible_kernel": "6.1.0-27-amd64", "ansible_distribution": "Debian",
                                                 "ansible_distribution_major_version": "12"}}))
    cb.v2_runner_on_ok(result(h, FakeTask("Read packages", "ansible.builtin.package_facts"),
                              {"ansible_facts": {"packages": {"chrony": [{"version": "4.3-2"}],
                                                              "jq": [{"version": "1.6"}]}}}))
    cb.v2_runner_on_ok(result(h, FakeTask("Read GPUs", "gpufleet.cloud.gpu_facts"),
                              {"ansible_facts": {"gpu": {"driver_version": "535.216.01", "cuda_version": "12.2",
                                                         "loaded_module_version": "535.216.01", "count": 8}}}))
    # A node without GPUs has no versions to compare, not empty ones.
    cb.v2_runner_on_ok(result(FakeHost("n2"), FakeTask("Read GPUs", "gpufleet.cloud.gpu_facts"),
                              {"ansible_facts": {"gpu": {"driver_version": None, "cuda_version": None,
                                                         "loaded_module_version": None, "count": 0}}}))
    report = finish(cb, tmp_path)
    assert report["hosts"]["n1"]["versions"] == {"kernel": "6.1.0-27-amd64", "chrony": "4.3-2", "driver": "535.216.01",
                                                 "CUDA (driver)": "12.2", "nvidia module": "535.216.01"}
    assert report["hosts"]["n2"]["versions"] == {}
    # The release peers must share.
    assert report["hosts"]["n1"]["os"] == "Debian 12" and "os" not in report["hosts"]["n2"]


def test_the_node_view_of_gpu_faults_goes_into_the_host_meta_and_is_not_drift(cb, tmp_path):
    doctor = {"health": {"state": "read", "time": "2026-12-01T06:00:00.123+00:00", "status": "fail", "checks": [],
                         "faults": [{"kind": "xid", "code": 79, "pci": "0000:3b:00.0", "class": "RESTART_BM",
                                     "tripped": True}]},
              "repairs": {"state": "absent", "detail": "File not found: /run/gpufleet-guard/repairs.json"}}
    node = {"container": False, "has_gpus": True, "doctor": doctor}
    cb.v2_runner_on_ok(result(FakeHost("n1"), FakeTask("Read the node's GPUs and RDMA devices",
                                                       "gpufleet.cloud.node_facts"),
                              {"ansible_facts": {"gpufleet_node": node}}))
    # A later role's read that answers from the facts returns none: kept.
    cb.v2_runner_on_ok(result(FakeHost("n1"), FakeTask("Read the node's facts", "gpufleet.cloud.node_facts",
                                                       role="gpufleet.cloud.baseline"), {"changed": False}))
    # An older collection's node_facts has no doctor: none in the report.
    cb.v2_runner_on_ok(result(FakeHost("n2"), FakeTask("Read the node's GPUs and RDMA devices",
                                                       "gpufleet.cloud.node_facts"),
                              {"ansible_facts": {"gpufleet_node": {"has_gpus": False}}}))
    report = finish(cb, tmp_path, ["n1", "n2"])
    assert report["hosts"]["n1"]["doctor"] == doctor and "doctor" not in report["hosts"]["n2"]
    assert report["records"] == [] and report["exit_code"] == 0


def test_a_resource_of_an_included_role_names_the_roles_that_reach_it(cb, tmp_path):
    # _nvidia_packages has no tag in site.yml: nvidia_driver and cuda include
    # it, so those are what --fix must run; the top of each chain counts.
    h = FakeHost("n1")
    driver = FakeRole("gpufleet.cloud.nvidia_driver")
    wrapper = FakeRole("gpufleet.cloud.cuda_wrapper", [FakeRole("gpufleet.cloud.cuda")])
    hold = FakeTask("Hold the pinned packages", "ansible.builtin.dpkg_selections", role="gpufleet.cloud._nvidia_packages")
    hold._role = FakeRole("gpufleet.cloud._nvidia_packages", [driver, wrapper])
    cb.v2_runner_item_on_ok(result(h, hold, {"changed": True, "item": "libnvidia-ml1",
                                             "_ansible_item_label": "libnvidia-ml1"}))
    plain = FakeTask("Configure chrony", "ansible.builtin.template", role="gpufleet.cloud.baseline")
    cb.v2_runner_on_ok(result(h, plain, {"changed": True}))
    records = {r["resource"]: r for r in finish(cb, tmp_path)["records"]}
    held = records["gpufleet.cloud._nvidia_packages : Hold the pinned packages [libnvidia-ml1]"]
    assert held["role"] == "gpufleet.cloud._nvidia_packages"
    assert held["applied_by"] == ["gpufleet.cloud.nvidia_driver", "gpufleet.cloud.cuda"]
    assert "applied_by" not in records["gpufleet.cloud.baseline : Configure chrony"]


@pytest.mark.parametrize(("alias", "hosts", "want"), [
    # A pull run's one host, localhost, under the node's inventory name.
    ("gpu-node-7", ["localhost"], {"gpu-node-7"}),
    # No name given: the host's own.
    ("", ["localhost"], {"localhost"}),
    # More than one host: a name for one would merge them, so none is renamed.
    ("gpu-node-7", ["localhost", "n2"], {"localhost", "n2"}),
])
def test_a_one_host_run_reports_under_the_name_given(cb, tmp_path, alias, hosts, want):
    cb.set_option("host_name", alias)
    for name in hosts:
        host = FakeHost(name, {"gpufleet_provider": "aws"})
        task = FakeTask("Configure chrony", "ansible.builtin.template", role="gpufleet.cloud.baseline")
        cb.v2_runner_on_ok(result(host, task, {"changed": True, "diff": [{"before": "a", "after": "b"}]}))
    report = finish(cb, tmp_path, hosts)
    assert set(report["hosts"]) == want
    assert {r["host"] for r in report["records"]} == want
    assert all(meta["provider"] == "aws" for meta in report["hosts"].values())
    assert report["exit_code"] == 2


# A real ansible-playbook run: which tasks a host never reached, and which
# failures end a host's run, are Ansible's to decide, not a fake's.
ENDED_EARLY = """
- name: Sort the nodes
  hosts: all
  gather_facts: false
  tasks:
    - name: Read the node
      ansible.builtin.command: /bin/false
      changed_when: false
      check_mode: false
      when: inventory_hostname == 'broken'

- name: Roles
  hosts: all
  gather_facts: false
  ignore_errors: "{{ ansible_check_mode }}"
  tasks:
    - name: Write one
      ansible.builtin.copy: {content: "1", dest: "{{ out }}/{{ inventory_hostname }}-one", mode: "0644"}
    - name: A check that fails
      ansible.builtin.command: /bin/false
      changed_when: false
      check_mode: false
    - name: Write two
      ansible.builtin.copy: {content: "2", dest: "{{ out }}/{{ inventory_hostname }}-two", mode: "0644"}
    - name: Not selected
      ansible.builtin.copy: {content: "3", dest: "{{ out }}/{{ inventory_hostname }}-three", mode: "0644"}
      tags: [other]
    - name: A rescued failure
      block:
        - name: Fails
          ansible.builtin.command: /bin/false
          check_mode: false
          ignore_errors: false
      rescue:
        - name: Rescue
          ansible.builtin.debug: {msg: rescued}

- name: A group nobody is in
  hosts: nobody
  gather_facts: false
  tasks:
    - name: Write four
      ansible.builtin.copy: {content: "4", dest: "{{ out }}/four", mode: "0644"}
"""


def play_records(tmp_path, play, hosts, *options):
    """Run `play` on `hosts` (local connections) with the callback; its records by (host, resource)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    (tmp_path / "play.yml").write_text(play)
    report_path = tmp_path / "drift.json"
    env = {**os.environ, "ANSIBLE_CALLBACKS_ENABLED": "gpufleet.cloud.drift",
           "GPUFLEET_DRIFT_REPORT": str(report_path), "ANSIBLE_CONFIG": str(root / "ansible.cfg")}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", hosts, "-c", "local", *options,
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"out={tmp_path}", str(tmp_path / "play.yml")],
        cwd=root, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert report_path.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return {(r["host"], r["resource"]): r for r in json.loads(report_path.read_text())["records"]}


def test_a_host_whose_run_ended_early_lists_what_it_never_scanned(tmp_path):
    records = play_records(tmp_path, ENDED_EARLY, "broken,fine,", "--check", "--diff", "--skip-tags", "other")
    states = {key: r["state"] for key, r in records.items()}
    # The host whose run went on: its failed check (ignored in check mode)
    # and its rescued failure are recorded, and it was scanned to the end.
    assert {k: v for k, v in states.items() if k[0] == "fine"} == {
        ("fine", "Write one"): "drifted", ("fine", "A check that fails"): "failed",
        ("fine", "Write two"): "drifted", ("fine", "Fails"): "failed"}
    # The host whose run ended in the first play: its failure, then every
    # resource task of the plays it belongs to, as not scanned. Not the
    # probe, the task --skip-tags left out, or a play for a group it is not in.
    assert {k: v for k, v in states.items() if k[0] == "broken"} == {
        ("broken", "Read the node"): "failed", ("broken", "Write one"): "could-not-verify",
        ("broken", "Write two"): "could-not-verify", ("broken", "Fails"): "could-not-verify"}
    for name in ("Write one", "Write two", "Fails"):
        record = records[("broken", name)]
        assert record["not_scanned"] is True
        assert record["message"] == "not scanned: this host's run ended when 'Read the node' failed"
    assert not any(r.get("not_scanned") for key, r in records.items() if key[0] == "fine")


# site.yml's shape in a real run (pull mode records one): a role's failure
# is rescued, the node's other roles go on, and the last play fails it.
ROLE_FAILED = """
- name: Roles
  hosts: all
  gather_facts: false
  tasks:
    - name: A role
      block:
        - name: Fails
          ansible.builtin.command: /bin/false
        - name: Write after
          ansible.builtin.copy: {content: "1", dest: "{{ out }}/after", mode: "0644"}
      rescue:
        - name: Record it
          ansible.builtin.set_fact: {failed_roles: [a role]}
    - name: Another role
      ansible.builtin.copy: {content: "2", dest: "{{ out }}/other", mode: "0644"}

- name: Fail the nodes whose roles failed
  hosts: all
  gather_facts: false
  tasks:
    - name: Name them
      ansible.builtin.fail: {msg: "{{ failed_roles }} failed"}
      when: failed_roles is defined
      tags: [gpufleet_drift_ignore]
"""


def test_what_a_failed_role_left_unreached_is_named_after_that_role_not_the_last_gate(tmp_path):
    records = play_records(tmp_path, ROLE_FAILED, "node,")
    assert {k[1]: r["state"] for k, r in records.items()} == {
        "Fails": "failed", "Write after": "could-not-verify", "Another role": "drifted"}
    assert records[("node", "Write after")]["message"] == "not scanned: this host's run ended when 'Fails' failed"
    assert (tmp_path / "other").exists() and not (tmp_path / "after").exists()


# site.yml's shape in a scan: each role a block, one naming the role it
# needs (__site_needs); check mode reads on past every failure.
NEEDS = """
- name: Roles
  hosts: all
  gather_facts: false
  ignore_errors: "{{ ansible_check_mode }}"
  tasks:
    - name: Driver
      vars: {__site_role: driver}
      block:
        - name: Apply driver
          ansible.builtin.import_role: {name: driver}
    - name: Toolkit
      vars: {__site_role: toolkit, __site_needs: [driver, absent]}
      block:
        - name: Apply toolkit
          ansible.builtin.import_role: {name: toolkit}
    - name: Other
      vars: {__site_role: other}
      block:
        - name: Apply other
          ansible.builtin.import_role: {name: other}
"""


def test_a_failed_record_names_the_role_it_needs_when_that_failed_first(tmp_path):
    for name in ("driver", "toolkit", "other"):
        (tmp_path / "roles" / name / "tasks").mkdir(parents=True)
        (tmp_path / "roles" / name / "tasks" / "main.yml").write_text(
            f"- name: Check {name}\n  ansible.builtin.assert: {{that: false, fail_msg: {name} is broken}}\n")
    records = play_records(tmp_path, NEEDS, "node,", "--check")
    messages = {key[1]: r["message"] for key, r in records.items() if r["state"] == "failed"}
    assert messages == {
        "driver : Check driver": "driver is broken",
        "toolkit : Check toolkit": "toolkit is broken (toolkit needs driver, which failed before it on this host)",
        "other : Check other": "other is broken"}
