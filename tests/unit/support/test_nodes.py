"""tests/support/nodes.py: a run over the podman connection names the
node's interpreter; any other run (the lab fleet over SSH, implicit
localhost) keeps Ansible's discovery, and a caller's env still wins. A run
over podman that met a node's vanished cgroup directory runs again once."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support import nodes


@pytest.fixture
def ran(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run",
                        lambda argv, **kw: calls.append((argv, kw["env"])) or subprocess.CompletedProcess(argv, 0, "", ""))
    monkeypatch.setattr(shutil, "which", lambda name: f"/venv/bin/{name}")
    monkeypatch.delenv("ANSIBLE_PYTHON_INTERPRETER", raising=False)
    return calls


def test_a_podman_run_names_the_interpreter(ran):
    nodes.run_playbook("-i", "node,", "-c", nodes.PODMAN_CONNECTION, "play.yml")
    assert ran[0][1]["ANSIBLE_PYTHON_INTERPRETER"] == nodes.PODMAN_PYTHON == "/usr/bin/python3"


@pytest.mark.parametrize("args", [("site.yml", "-i", "inventories/lab"), ("-i", "node,", "-c", "ssh", "play.yml"),
                                  ("-i", "podman,", "play.yml")])
def test_other_runs_keep_discovery(ran, args):
    nodes.run_playbook(*args)
    assert "ANSIBLE_PYTHON_INTERPRETER" not in ran[0][1]


def test_the_callers_env_wins(ran):
    nodes.run_playbook("-i", "node,", "-c", nodes.PODMAN_CONNECTION, "play.yml",
                       env={"ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3.11"})
    assert ran[0][1]["ANSIBLE_PYTHON_INTERPRETER"] == "/usr/bin/python3.11"


# A run over podman that fails because a node's cgroup directory vanished
# runs again, once, after the directory is made again; nothing else runs twice.
GONE = ("fatal: [n1]: UNREACHABLE! => msg: 'Task failed: EOF on stream; last 100 lines received: Error: runc: exec "
        "failed: unable to start container process: error adding pid 15984 to cgroups: failed to write 15984: openat2 "
        "/sys/fs/cgroup/systemd/libpod_parent/libpod-ba16/cgroup.procs: no such file or directory'\n"
        "PLAY RECAP *****\n"
        "n1                         : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0\n")
# The same, after tasks had run on the node (a reconnection later in the run).
GONE_LATER = GONE.replace("ok=0    changed=0", "ok=7    changed=2")


@pytest.fixture
def runs(monkeypatch):
    """The ansible-playbook runs made, answered from `answers` in turn; and
    the directories made."""
    made, calls, answers = [], [], []
    monkeypatch.setattr(nodes.shutil, "which", lambda name: "/venv/bin/" + name)
    monkeypatch.setattr(nodes.os, "makedirs", lambda path, exist_ok=False: made.append(path))

    def run(argv, **_kwargs):
        calls.append(argv)
        rc, out = answers.pop(0)
        return subprocess.CompletedProcess(argv, rc, out, "")

    monkeypatch.setattr(nodes.subprocess, "run", run)
    return made, calls, answers


def test_a_run_that_met_a_vanished_cgroup_runs_again_once_it_is_made(runs, capsys):
    made, calls, answers = runs
    answers += [(4, GONE), (0, "ok")]
    result = nodes.run_playbook("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml")
    assert result.returncode == 0 and result.stdout == "ok"
    assert made == ["/sys/fs/cgroup/systemd/libpod_parent/libpod-ba16"]
    assert len(calls) == 2 and calls[0] == calls[1]
    assert "the cgroup directory /sys/fs/cgroup/systemd/libpod_parent/libpod-ba16 is gone" in capsys.readouterr().err


def test_a_second_failure_is_returned_as_it_is(runs):
    made, calls, answers = runs
    answers += [(4, GONE), (4, GONE)]
    assert nodes.run_playbook("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml").returncode == 4
    assert len(calls) == 2 and len(made) == 1


@pytest.mark.parametrize("args, rc, out", [
    # Any other failure, over podman.
    (("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml"), 2, "fatal: [n1]: FAILED! => msg: the role refused"),
    # Not a podman run: the message is someone else's.
    (("-i", "inventory", "play.yml"), 4, GONE),
    # A run that passed, whatever it printed.
    (("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml"), 0, GONE),
    # Tasks had run before the connection failed: not run twice.
    (("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml"), 4, GONE_LATER),
    # No recap at all: nothing says what ran.
    (("-i", "n1,", "-c", nodes.PODMAN_CONNECTION, "play.yml"), 4, GONE.split("PLAY RECAP", maxsplit=1)[0]),
])
def test_nothing_else_runs_twice(runs, args, rc, out):
    made, calls, answers = runs
    answers.append((rc, out))
    assert nodes.run_playbook(*args).returncode == rc
    assert len(calls) == 1 and made == []
