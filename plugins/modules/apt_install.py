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
module: apt_install
short_description: Install packages with ansible.builtin.apt, only where dpkg says something is missing
version_added: 0.1.0
description:
  - What M(ansible.builtin.apt) does with O(state=present), without opening
    apt's cache on a node that has every package already.
    M(ansible.builtin.apt) opens apt's whole cache before it looks at a
    single package (0.4 s and more on a Debian node), in every run,
    converged or not.
  - First reads dpkg's list of installed packages (C(dpkg-query)), apt's
    marks of what it installed as a dependency
    (C(/var/lib/apt/extended_states)) and, for a version pattern
    (C(nvidia-open-580=580.95.05*)), the versions apt knows of the package
    (C(apt-cache policy)). apt does not run, and the task reports no
    change, when every package of O(name) is installed (dpkg's status
    C(ii) or C(hi)), marked as installed by hand, and at its version (the
    one given, or, for a pattern, the only version apt knows that the
    pattern matches).
  - Otherwise M(ansible.builtin.apt) runs with the task's options, and its
    result is the task's, where a package is missing or at another
    version; where it was installed as a dependency (apt marks every
    package a task names as installed by hand, even when it installs
    nothing); where a pattern matches another version too (apt moves to
    the newest match); for a name pattern or C(>=); and where the read
    failed.
  - An action plugin; the read runs in check mode too, and changes nothing.
author: gpufleet developers (@gpufleet)
options:
  name:
    description:
      - The packages, as M(ansible.builtin.apt) names them (C(jq),
        C(jq=1.7.1-3), C(libc6:i386)).
      - An empty list installs nothing.
    type: list
    elements: str
    required: true
  state:
    description: Only V(present).
    type: str
    choices: [present]
    default: present
  install_recommends:
    description: As M(ansible.builtin.apt)'s; unset, apt's configuration decides.
    type: bool
  allow_downgrade:
    description: As M(ansible.builtin.apt)'s.
    type: bool
    default: false
  allow_change_held_packages:
    description: As M(ansible.builtin.apt)'s.
    type: bool
    default: false
attributes:
  action:
    support: full
    description: An action plugin around M(ansible.builtin.apt).
  check_mode:
    support: full
    description: As M(ansible.builtin.apt); the dpkg read runs in check mode too.
  diff_mode:
    support: full
    description: As M(ansible.builtin.apt) where it runs; nothing to show where it does not.
  platform:
    support: full
    platforms: debian
    description: Debian and Ubuntu nodes, as M(ansible.builtin.apt).
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Install base packages
  gpufleet.cloud.apt_install:
    name: [chrony, jq, numactl]
    install_recommends: false
"""

RETURN = r"""
apt_ran:
  description: Whether M(ansible.builtin.apt) ran; its own return values come with it when it did.
  returned: always
  type: bool
  sample: false
msg:
  description: Where apt did not run, the packages found installed.
  returned: when apt did not run
  type: str
  sample: "installed: chrony, jq, numactl"
"""
