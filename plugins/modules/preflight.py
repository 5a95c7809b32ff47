#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Modules carry GPLv3, as ansible-test's validate-modules requires of every
# module; the rest of the collection is Apache-2.0.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight
short_description: The checks a gpufleet.cloud role runs before it changes anything
version_added: 0.1.0
description:
  - Internal to gpufleet.cloud. Every role of the collection runs it first,
    through the internal C(_common) role; it is documented because its
    messages and its warnings reach users.
  - Fails unless the node runs Debian or Ubuntu with systemd (from the
    gathered facts), unless O(os_check=false).
  - Fails when an option that the role's C(meta/argument_specs.yml) declares
    as a list is given as a string, a number or null. Ansible's role argument
    validation accepts a string there (it splits it for its own check only),
    and the role would then read the raw string.
  - Fails when an option that the role's C(meta/argument_specs.yml) declares
    as V(int), V(float), V(bool), V(str) or V(path) has a value of another
    type, or one outside its C(choices), naming the option, what it takes,
    the value (hidden for a C(no_log) option) and an example. Ansible's own
    role argument validation checks the same first when a role is applied
    as it is; site.yml applies the roles with C(rolespec_validate=false),
    so its users get these messages instead of Ansible's conversion errors.
  - Warns about every variable that carries the role's prefix (for example
    C(baseline_)) but is neither an option of the role nor a variable the
    role sets itself, with the closest option name as a suggestion. Such a
    variable is a misspelling the role silently ignores. With the variable
    C(gpufleet_strict_inputs=true) each of them fails the task instead.
  - Fails with the message of every check of the calling role whose
    condition is false. These are its own checks of what a specification cannot
    express (ranges, formats, options that depend on each other), given as
    the variable C(_common_checks), a list of C(that) (a condition, true when
    the input is good) and C(msg) (what is wrong, naming the option, and what
    fixes it), and optionally C(warn) (V(true) makes a false condition a
    warning, for settings that work but poorly). Every check is evaluated,
    so one run names every bad input.
    They are evaluated only when the OS check and the input shapes passed,
    and a message is templated only when its condition is false.
  - Runs on the controller; reads nothing from the node and changes nothing.
author: gpufleet developers (@gpufleet)
options:
  role:
    description:
      - The calling role's short name, for example V(baseline). Its
        C(meta/argument_specs.yml) and task files, next to C(_common) in the
        collection, say what it accepts and sets.
    type: str
    required: true
  os_check:
    description:
      - Whether to check the operating system. Roles with a wider check of
        their own (supported releases and architectures) pass V(false).
    type: bool
    default: true
attributes:
  action:
    support: full
    description: Runs on the controller only; nothing is sent to the node.
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
  platform:
    support: full
    platforms: posix
    description: Any node the roles support; the checks run on the controller.
notes:
  - C(gpufleet_strict_inputs) is a plain variable (set it in group_vars or
    with -e), read by every role of the collection.
"""

EXAMPLES = r"""
# In a role of the collection (roles/<role>/tasks/preflight.yml):
- name: Check the node and the role's inputs
  ansible.builtin.import_role:
    name: gpufleet.cloud._common
    tasks_from: preflight
  vars:
    _common_role: baseline
    _common_checks:
      - that: "{{ baseline_nofile | int >= 1024 }}"
        msg: "baseline_nofile must be at least 1024 (got {{ baseline_nofile }})."

# Make every misspelt role variable an error, fleet-wide (group_vars/all.yml):
# gpufleet_strict_inputs: true
"""

RETURN = r"""
unknown_inputs:
  description: The variables with the role's prefix that the role does not accept or set.
  returned: always
  type: list
  elements: str
  sample: [baseline_ntp_server]
"""
