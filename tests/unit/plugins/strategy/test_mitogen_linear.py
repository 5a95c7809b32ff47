"""gpufleet.cloud.mitogen_linear as Ansible loads it: Mitogen's strategy
over the linear one when mitogen is installed, and the linear strategy,
with a warning, when it is not; and in a real run, the CPUs left to the
kernel (Mitogen's own policy pins everything a run starts)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible.plugins.loader import strategy_loader
from ansible.plugins.strategy.linear import StrategyModule as Linear

MODULE = "ansible_collections.gpufleet.cloud.plugins.strategy.mitogen_linear"
ROOT = Path(__file__).resolve().parents[4]
# What a command of the run may run on; a worker and the connection's
# interpreter are the processes in between.
PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Read the CPUs this command may run on
      ansible.builtin.command:
        argv: [python3, -c, "import json, os; print(json.dumps(sorted(os.sched_getaffinity(0))))"]
      register: cpus
      changed_when: false

    - name: Show them
      ansible.builtin.debug:
        msg: "CPUS={{ cpus.stdout }}"
"""


def test_the_collections_strategy_is_mitogen_over_linear():
    mitogen_strategy = pytest.importorskip("ansible_mitogen.strategy")
    cls = strategy_loader.get("gpufleet.cloud.mitogen_linear", class_only=True)
    assert issubclass(cls, mitogen_strategy.StrategyMixin)
    assert issubclass(cls, Linear)
    # Mitogen's mixin comes first, so its run() wraps linear's.
    assert cls.__mro__.index(mitogen_strategy.StrategyMixin) < cls.__mro__.index(Linear)


def test_without_mitogen_it_is_linear_and_says_so(monkeypatch):
    warnings = []
    monkeypatch.setattr("ansible.utils.display.Display.warning", lambda self, msg, *a, **k: warnings.append(msg))
    # An import of ansible_mitogen now fails as it does where it is not installed.
    for name in [n for n in sys.modules if n == "ansible_mitogen" or n.startswith("ansible_mitogen.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ansible_mitogen", None)
    module = importlib.import_module(MODULE)
    try:
        fallback = importlib.reload(module)
        assert fallback.MITOGEN is None
        assert fallback.StrategyModule.__mro__[1] is Linear
        # Linear itself needs a real task queue manager; what matters here
        # is what the fallback says when a play starts it.
        monkeypatch.setattr(Linear, "__init__", lambda self, tqm: None)
        fallback.StrategyModule(None)
        assert len(warnings) == 1 and "mitogen package is not installed" in warnings[0]
    finally:
        monkeypatch.undo()
        importlib.reload(module)


def test_a_run_leaves_every_cpu_to_what_it_starts(tmp_path):
    # Mitogen's own policy, on 2 or 3 CPUs, reserves the first for its
    # multiplexer and pins the workers and every process they start to the
    # CPU left, so a command of the run sees one CPU (on 4 or more, all but
    # the two it keeps). Where this machine gives the test one CPU there is
    # nothing to pin, and nothing to tell apart.
    pytest.importorskip("ansible_mitogen.affinity")
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip(f"this process may run on one CPU only ({mine}): a pin could not be seen")
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "inventory.json").write_text(json.dumps(
        {"all": {"hosts": {"local": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_STRATEGY": "gpufleet.cloud.mitogen_linear"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.json"),
                           str(tmp_path / "play.yml")], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The strategy is Mitogen's, not the fallback: a pin could be seen.
    assert "mitogen package is not installed" not in done.stderr, done.stderr
    shown = [line for line in done.stdout.splitlines() if "CPUS=" in line]
    assert shown, done.stdout[-3000:]
    assert json.loads(shown[0].split("CPUS=", 1)[1].strip().strip('"')) == mine, shown[0]
