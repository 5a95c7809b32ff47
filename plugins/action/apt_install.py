# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.cloud.apt_install: ansible.builtin.apt with state=present, run
only where dpkg says it has something to do (see
plugins/modules/apt_install.py for the documentation).

ansible.builtin.apt opens apt's whole cache before it looks at a single
package: 0.4 s and more on a test node (1.1 to 1.4 s with a version
pattern and a pin), in every role's install step on every node of every
run, converged or not. dpkg's list, apt's marks and apt-cache policy's
version table answer in a few hundredths of a second whether apt has
anything to do (plugins/plugin_utils/_dpkg.py, needs_apt); only where it
has, or where only apt can tell (a name pattern, >=), does apt run, with
the task's arguments as they are."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._action import run_read_only
from ansible_collections.gpufleet.cloud.plugins.plugin_utils._dpkg import install_read, needs_apt

ARGUMENT_SPEC = {
    "name": {"type": "list", "elements": "str", "required": True},
    "state": {"type": "str", "default": "present", "choices": ["present"]},
    "install_recommends": {"type": "bool"},
    "allow_downgrade": {"type": "bool", "default": False},
    "allow_change_held_packages": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        names = [name.strip() for name in args["name"] if name.strip()]
        if not names:
            result.update(changed=False, apt_ran=False, msg="no package to install")
            return result
        read = run_read_only(self, install_read(names), task_vars)
        try:
            left = needs_apt(names, read.get("stdout") or "") if not read.get("failed") else names
        except ValueError:
            # A list dpkg could not give is never "all installed": apt decides.
            left = names
        if not left:
            result.update(changed=False, apt_ran=False, msg="installed: %s" % ", ".join(names))
            return result
        apt_args = {key: value for key, value in args.items() if value is not None}
        apt_args["name"] = names
        result.update(self._execute_module(module_name="ansible.legacy.apt", module_args=apt_args,
                                           task_vars=task_vars))
        result["apt_ran"] = True
        return result
