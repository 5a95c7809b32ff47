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
module: sysctl
short_description: ansible.posix.sysctl, with a diff of the value it found
version_added: 0.1.0
description:
  - Runs M(ansible.posix.sysctl) with the same options; it decides and makes
    every change.
  - First reads the parameter's line in O(sysctl_file) and, when the task
    sets the kernel too (O(sysctl_set) or O(reload)), its running value
    under C(/proc/sys). When M(ansible.posix.sysctl) reports a change, a
    diff shows those values against the wanted one, so a drift scan names
    what it found, not only that it differs.
  - An action plugin; the reads use M(ansible.builtin.slurp), which reads in
    check mode too.
author: gpufleet developers (@gpufleet)
options:
  name:
    description: The kernel parameter (C(vm.swappiness)).
    type: str
    required: true
    aliases: [key]
  value:
    description: Its wanted value.
    type: str
    aliases: [val]
  state:
    description: Whether the parameter's line is in O(sysctl_file).
    type: str
    choices: [present, absent]
    default: present
  ignoreerrors:
    description: Use C(-e) to ignore errors about unknown keys.
    type: bool
    default: false
  reload:
    description: Reload O(sysctl_file) into the kernel when the file changed.
    type: bool
    default: true
  sysctl_file:
    description: The file the parameter's line is in.
    type: path
    default: /etc/sysctl.conf
  sysctl_set:
    description: Set the running value with C(sysctl -w), and compare it too.
    type: bool
    default: false
attributes:
  action:
    support: full
    description: An action plugin around M(ansible.posix.sysctl).
  check_mode:
    support: full
    description: As M(ansible.posix.sysctl); the reads run in check mode too.
  diff_mode:
    support: full
    description: The line found in the file and the running value, against the wanted ones.
  platform:
    support: full
    platforms: posix
    description: Linux nodes with C(/proc/sys), as M(ansible.posix.sysctl).
seealso:
  - module: ansible.posix.sysctl
"""

EXAMPLES = r"""
- name: Keep the page cache from swapping out training data
  gpufleet.cloud.sysctl:
    name: vm.swappiness
    value: "10"
    sysctl_file: /etc/sysctl.d/90-gpufleet.conf
    sysctl_set: true
    reload: false
"""

RETURN = r"""
diff:
  description: When a change is reported, the line found in the file and the running value against the wanted ones.
  returned: changed
  type: dict
  sample:
    before_header: vm.swappiness (found)
    before: "/etc/sysctl.d/90-gpufleet.conf: vm.swappiness = 10\nrunning: 60\n"
    after_header: vm.swappiness (wanted)
    after: "/etc/sysctl.d/90-gpufleet.conf: vm.swappiness = 10\nrunning: 10\n"
"""
