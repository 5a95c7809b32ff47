# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: mitogen_linear
short_description: Ansible's linear strategy, run through Mitogen when it is installed
description:
  - The C(linear) strategy (every host finishes a task before the next task
    starts), with its SSH and local connections run by Mitogen for Ansible
    when the C(mitogen) Python package is importable. Mitogen keeps one
    Python interpreter per host for the whole run and sends each module's
    code once, instead of starting Python and unpacking the module on the
    node for every task; C(bench/fleet) measures what that saves.
  - Without the C(mitogen) package it warns once and runs Ansible's own
    C(linear) strategy, so a play behaves the same everywhere, only slower.
  - Connections Mitogen does not handle are run by Ansible as usual.
  - Mitogen's pinning of processes to CPUs is turned off, and the kernel
    places them. On a controller with 2 or 3 CPUs Mitogen reserves the
    first for its multiplexer and pins the top-level process, every worker
    and every connection process it starts to the one CPU left. What those
    start inherits the pin, down to the commands of a local connection and
    to the interpreter behind a C(podman exec) with every module and package
    install it runs. Runs side by side then share that one CPU while the
    other idles.
  - Unlike C(strategy_plugins) pointed into a virtual environment, the
    name C(gpufleet.cloud.mitogen_linear) works from any installation of the
    collection.
author: gpufleet developers (@gpufleet)
requirements:
  - mitogen (optional; see the description)
seealso:
  - name: Mitogen for Ansible
    description: How Mitogen runs Ansible's modules.
    link: https://mitogen.networkgenomics.com/ansible_detailed.html
"""

from ansible.plugins.strategy.linear import StrategyModule as _Linear
from ansible.utils.display import Display

try:
    import ansible_mitogen.loaders  # noqa: F401  (must be imported before the strategy)
    import ansible_mitogen.affinity
    import ansible_mitogen.strategy
except ImportError:
    MITOGEN = None
else:
    MITOGEN = ansible_mitogen.strategy
    # Mitogen reads its module-level policy each time it pins a process (the
    # top-level process and multiplexer when the run starts, each worker as
    # it forks); the base Policy pins nothing. Mitogen has no setting for
    # this (mitogen-hq/mitogen#648: the inherited mask reaches the managed
    # host's commands).
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

if MITOGEN is not None:
    class StrategyModule(MITOGEN.StrategyMixin, _Linear):
        """The linear strategy with Mitogen's connections and workers."""

else:
    class StrategyModule(_Linear):  # type: ignore[no-redef]
        """The linear strategy, as Ansible runs it."""

        def __init__(self, *args, **kwargs):
            Display().warning("gpufleet.cloud.mitogen_linear: the mitogen package is not installed; "
                              "running Ansible's linear strategy instead (slower, same result)")
            super().__init__(*args, **kwargs)
