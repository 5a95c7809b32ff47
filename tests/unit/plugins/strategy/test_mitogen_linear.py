"""gpufleet.cloud.mitogen_linear as Ansible loads it: Mitogen's strategy
over the linear one when mitogen is installed, and the linear strategy,
with a warning, when it is not."""

from __future__ import annotations

import importlib
import sys

import pytest

from ansible.plugins.loader import strategy_loader
from ansible.plugins.strategy.linear import StrategyModule as Linear

MODULE = "ansible_collections.gpufleet.cloud.plugins.strategy.mitogen_linear"


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
