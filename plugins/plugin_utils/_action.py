# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the collection's action plugins. Private to gpufleet.cloud."""

from __future__ import annotations


def run_read_only(action, script, task_vars):
    """The command module's result of a shell `script` that only reads the
    node, run by `action` (an ActionBase) in check mode too, where the
    command module would otherwise skip it."""
    check_mode = action._task.check_mode
    action._task.check_mode = False
    try:
        return action._execute_module(module_name="ansible.legacy.command",
                                      module_args={"_raw_params": script, "_uses_shell": True},
                                      task_vars=task_vars)
    finally:
        action._task.check_mode = check_mode
