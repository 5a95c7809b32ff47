# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.cloud.preflight: the checks every role runs first, in one task
per role and node (see plugins/modules/preflight.py for the documentation).

One action rather than an assert per concern: each task costs the
controller a templating pass and a result per node, and these checks need
no node at all (the facts are already gathered)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _role_inputs


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("role", "os_check"))

    def _role_dir(self, role):
        # The task lives in _common, a sibling of every role of the
        # collection, in a checkout and in an installed collection alike.
        common = getattr(getattr(self._task, "_role", None), "_role_path", None)
        if not common:
            raise AnsibleActionFail("gpufleet.cloud.preflight runs inside the collection's roles only "
                                    "(through gpufleet.cloud._common), not in a play's own tasks")
        return os.path.join(os.path.dirname(common), role)

    def _failed_checks(self, checks):
        """(errors, warnings): the messages of the calling role's own checks
        whose condition is false, a check with ``warn: true`` giving a
        warning instead of an error. Every check is evaluated, so one run
        names every bad input. They are templated here, one at a time and
        only after the input shapes passed: a string given for a list would
        make a condition written for a list fail to template, and a message
        is templated only when its condition is false."""
        if not isinstance(checks, list):
            raise AnsibleActionFail("_common_checks must be a list, got %s" % type(checks).__name__)
        failed, warned = [], []
        for index, check in enumerate(checks):
            if not isinstance(check, dict) or not {"that", "msg"} <= set(check) <= {"that", "msg", "warn"}:
                raise AnsibleActionFail("_common_checks[%d] must have the keys that and msg, and may have warn, "
                                        "got %r" % (index, check))
            try:
                passed = boolean(self._templar.template(check["that"]), strict=True)
                warn = boolean(check.get("warn", False), strict=True)
            except TypeError:
                raise AnsibleActionFail("_common_checks[%d].that and .warn must give true or false, got %r"
                                        % (index, check)) from None
            except AnsibleError as exc:
                # An input an earlier check refused (an unsupported system,
                # say) can make a later condition fail to template: that is
                # one more reason to fix the inputs, not a crash.
                failed.append("_common_checks[%d] could not be evaluated: %s" % (index, " ".join(str(exc).split())))
                continue
            if not passed:
                try:
                    message = " ".join(str(self._templar.template(check["msg"])).split())
                except AnsibleError as exc:
                    message = ("_common_checks[%d] failed, and its message could not be rendered: %s"
                               % (index, " ".join(str(exc).split())))
                (warned if warn else failed).append(message)
        return failed, warned

    def _option_values(self, spec, task_vars):
        """The templated values of the role's options that are set. A list
        or dict option whose template fails fails the task; a scalar one is
        left to the role, whose own use of it names the failure."""
        values = {}
        shaped = set(spec.shaped_options)
        for name in spec.options:
            if name in task_vars:
                try:
                    values[name] = self._templar.template(task_vars[name])
                except AnsibleError:
                    if name in shaped:
                        raise
        return values

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        role = self._task.args.get("role")
        if not isinstance(role, str) or not role:
            raise AnsibleActionFail("gpufleet.cloud.preflight: role is required (the calling role's name)")
        try:
            os_check = boolean(self._task.args.get("os_check", True), strict=True)
            strict = boolean(self._templar.template(task_vars.get("gpufleet_strict_inputs", False)), strict=True)
        except TypeError as exc:
            raise AnsibleActionFail("gpufleet_strict_inputs: expected true or false (%s)" % exc) from None
        try:
            spec = _role_inputs.RoleSpec(self._role_dir(role), role)
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail("gpufleet.cloud.preflight: %s" % exc) from None

        errors = []
        if os_check:
            facts = task_vars.get("ansible_facts") or {}
            family, manager = facts.get("os_family"), facts.get("service_mgr")
            if family != "Debian" or manager != "systemd":
                errors.append("%s supports Debian and Ubuntu with systemd; %s runs %s with %s%s." % (
                    role, task_vars.get("inventory_hostname", "this node"), facts.get("distribution", "unknown"),
                    manager or "an unknown service manager",
                    # The roles read more of the node themselves, but not
                    # these: the play's own fact gathering gives them.
                    "" if family and manager else " (no facts were gathered: keep gather_facts on for this play)"))

        # Shapes, types and choices in the project's words, for plays that
        # apply the roles with rolespec_validate: false (site.yml), where
        # Ansible's own check would answer with its raw conversion error;
        # the fleet-wide settings every role reads; then what else
        # argument_specs says (a firewall rule without its port).
        fleet = {name: self._templar.template(task_vars[name]) for name in _role_inputs.FLEET if name in task_vars}
        errors.extend(_role_inputs.input_errors(spec, self._option_values(spec, task_vars), fleet))
        result.setdefault("warnings", []).extend(
            _role_inputs.renamed_message(old, new) for old, new in _role_inputs.renamed_inputs(spec, task_vars))

        if not errors:
            failed, warned = self._failed_checks(task_vars.get("_common_checks") or [])
            errors.extend(failed)
            result.setdefault("warnings", []).extend(warned)

        unknown = _role_inputs.unknown_inputs(spec, task_vars)
        messages = [_role_inputs.unknown_message(spec, n, s, strict) for n, s in unknown]
        if strict:
            errors.extend(messages)
        else:
            result.setdefault("warnings", []).extend(messages)

        result.update(changed=False, unknown_inputs=[n for n, dummy in unknown])
        if errors:
            result.update(failed=True, msg=" ".join(errors))
        return result
