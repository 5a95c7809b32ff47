"""gpufleet.cloud.sysctl in a real ansible-playbook run against this machine
(a local connection, in check mode: the kernel is read, never written):
ansible.posix.sysctl decides, and a change comes with the value found in
the file and the kernel against the wanted one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.cloud.plugins.action import sysctl

ROOT = Path(__file__).resolve().parents[4]

PLAY = """
- name: Kernel parameters, as baseline writes them
  hosts: local
  gather_facts: false
  tasks:
    - name: A line with another value, file only
      gpufleet.cloud.sysctl: {name: vm.swappiness, value: "10", sysctl_file: "{file}", reload: false}
    - name: A line that is missing, file only
      gpufleet.cloud.sysctl: {name: vm.max_map_count, value: "262144", sysctl_file: "{file}", reload: false}
    - name: A line in sync, file only
      gpufleet.cloud.sysctl: {name: net.core.somaxconn, value: "4096", sysctl_file: "{file}", reload: false}
    - name: The kernel too, with a value it does not run
      gpufleet.cloud.sysctl:
        name: vm.swappiness
        value: "{other}"
        sysctl_file: "{file}"
        sysctl_set: true
        reload: false
    - name: A line to remove
      gpufleet.cloud.sysctl: {name: vm.swappiness, state: absent, sysctl_file: "{file}", reload: false}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sysctl")
    conf = tmp / "90-gpufleet.conf"
    conf.write_text("# written by hand\nvm.swappiness = 60\nnet.core.somaxconn = 4096\n")
    running = Path("/proc/sys/vm/swappiness").read_text().strip()
    other = str(1 if running != "1" else 2)
    (tmp / "inventory.json").write_text(json.dumps(
        {"all": {"hosts": {"local": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    (tmp / "play.yml").write_text(PLAY.replace("{file}", str(conf)).replace("{other}", other))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "--check", "-i",
                           str(tmp / "inventory.json"), str(tmp / "play.yml")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tasks = {t["task"]["name"]: t["hosts"]["local"] for t in json.loads(done.stdout)["plays"][0]["tasks"]}
    # Check mode wrote nothing.
    assert conf.read_text() == "# written by hand\nvm.swappiness = 60\nnet.core.somaxconn = 4096\n"
    return tasks, str(conf), running, other


def test_a_changed_line_shows_the_value_found_in_the_file(results):
    tasks, conf, _running, _other = results
    out = tasks["A line with another value, file only"]
    assert out["changed"] is True
    assert out["diff"] == {"before_header": "vm.swappiness (found)", "after_header": "vm.swappiness (wanted)",
                           "before": f"{conf}: vm.swappiness = 60\n", "after": f"{conf}: vm.swappiness = 10\n"}
    missing = tasks["A line that is missing, file only"]
    assert missing["changed"] is True and missing["diff"]["before"] == f"{conf}: (not set)\n"


def test_a_line_in_sync_has_no_diff(results):
    out = results[0]["A line in sync, file only"]
    assert out["changed"] is False and "diff" not in out


def test_the_running_value_is_read_when_the_task_sets_the_kernel(results):
    tasks, conf, running, other = results
    out = tasks["The kernel too, with a value it does not run"]
    assert out["changed"] is True
    assert out["diff"]["before"] == f"{conf}: vm.swappiness = 60\nrunning: {running}\n"
    assert out["diff"]["after"] == f"{conf}: vm.swappiness = {other}\nrunning: {other}\n"


def test_a_line_to_remove_shows_it_going(results):
    out = results[0]["A line to remove"]
    assert out["changed"] is True
    assert out["diff"]["before"].endswith("vm.swappiness = 60\n") and out["diff"]["after"].endswith("(not set)\n")


@pytest.mark.parametrize(("name", "path"), [
    ("vm.swappiness", "/proc/sys/vm/swappiness"),
    ("net.ipv4.conf.eth0/1.rp_filter", "/proc/sys/net/ipv4/conf/eth0.1/rp_filter"),
])
def test_proc_path_swaps_dots_and_slashes(name, path):
    assert sysctl.proc_path(name) == path


def test_file_values_read_as_sysctl_reads_them():
    text = ("# c\n; c\nvm.swappiness=1\n-net.core.somaxconn = 1024\nvm.swappiness = 5\n"
            "net.ipv4.tcp_rmem = 4096\t87380  6291456\n")
    assert sysctl.file_value(text, "vm.swappiness") == "5"
    assert sysctl.file_value(text, "net.core.somaxconn") == "1024"
    assert sysctl.file_value(text, "net.ipv4.tcp_rmem") == "4096 87380 6291456"
    assert sysctl.file_value(text, "vm.max_map_count") is None
