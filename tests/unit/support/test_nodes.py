"""tests/support/nodes.py: a run over the podman connection names the
node's interpreter; any other run (the lab fleet over SSH, implicit
localhost) keeps Ansible's discovery, and a caller's env still wins."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support import nodes


@pytest.fixture
def ran(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: calls.append((argv, kw["env"])))
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
