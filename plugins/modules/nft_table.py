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
module: nft_table
short_description: Make the kernel run exactly the nftables table a file defines
version_added: 0.1.0
description:
  - Compares the rules the kernel runs in one nftables table with the rules
    the ruleset file O(path) would load, and loads the file when they differ.
  - Both sides are nft's own listing, so formatting in the file does not
    count, and a rule added, removed or changed at runtime (C(nft add rule))
    does, even when the file and any marker in the table are unchanged.
  - The file's listing comes from loading it into a throwaway network
    namespace (C(unshare --net)), which needs C(CAP_SYS_ADMIN). Without it,
    a normal run loads the file and compares the kernel's listing before and
    after; check mode cannot, and reports the task as skipped with the
    reason (a drift scan reports it as could-not-verify, never as in sync).
  - The file must replace its own table in one transaction (declare, delete,
    define), as the security role's file does; C(nft -f) then swaps the
    table atomically.
author: gpufleet developers (@gpufleet)
requirements:
  - nft (Debian package nftables) and unshare (util-linux) on the target
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Needs CAP_SYS_ADMIN on the target; without it the task is skipped with the reason.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Before is the table the kernel runs, after the table the file defines, both as nft lists them.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  path:
    description: The ruleset file on the target that defines the table.
    type: path
    required: true
  family:
    description: The table's address family.
    type: str
    choices: [ip, ip6, inet, arp, bridge, netdev]
    default: inet
  name:
    description: The table's name, as the file defines it.
    type: str
    required: true
seealso:
  - name: nft(8)
    description: The nftables command, its ruleset syntax and C(list table).
    link: https://manpages.debian.org/stable/nftables/nft.8.en.html
notes:
  - Only the named table is read and replaced; other tables (Docker's,
    podman's) are left alone.
"""

EXAMPLES = r"""
- name: Load the firewall ruleset atomically
  gpufleet.cloud.nft_table:
    path: /etc/nftables.d/gpufleet.nft
    family: inet
    name: gpufleet
"""

RETURN = r"""
live:
  description: The table the kernel ran before this task, as nft lists it; empty when it did not exist.
  returned: success
  type: str
wanted:
  description: The table the file defines, as nft lists it; absent when it could not be computed.
  returned: when the file's listing could be computed
  type: str
method:
  description:
    - How the file's table was read. C(namespace) loads it in a throwaway
      network namespace; C(reload) loads it into the kernel and lists the
      result (no CAP_SYS_ADMIN, not in check mode).
  returned: success
  type: str
  sample: namespace
"""

import os

from ansible.module_utils.basic import AnsibleModule

# `nft list table` of a table that does not exist.
_ABSENT = "No such file or directory"
# unshare(2) without CAP_SYS_ADMIN, as util-linux reports it.
_NOT_PERMITTED = "Operation not permitted"


def _live(module, nft, family, name):
    rc, out, err = module.run_command([nft, "list", "table", family, name])
    if rc == 0:
        return out
    if _ABSENT in err:
        return ""
    module.fail_json(msg="nft list table %s %s failed (rc %s): %s" % (family, name, rc, err.strip()))


def _in_namespace(module, nft, path, family, name):
    """The file's table as nft lists it once loaded, in a network namespace
    of its own, so the kernel the node runs is never touched. None when this
    process may not create one."""
    unshare = module.get_bin_path("unshare", required=True)
    # Two nft runs in one namespace: a `list` inside the loading transaction
    # would see the table before its rules are committed.
    script = 'nft="$0"; "$nft" -f "$1" && "$nft" list table "$2" "$3"'
    rc, out, err = module.run_command([unshare, "--net", "--", "/bin/sh", "-c", script, nft, path, family, name])
    if rc == 0:
        return out
    if _NOT_PERMITTED in err and "unshare" in err:
        return None
    module.fail_json(msg="%s does not load (rc %s): %s; check the file with: nft -c -f %s"
                     % (path, rc, err.strip(), path))


def _load(module, nft, path):
    rc, _out, err = module.run_command([nft, "-f", path])
    if rc != 0:
        module.fail_json(msg="nft -f %s failed (rc %s), the table is left as it was: %s" % (path, rc, err.strip()))


def _diff(live, wanted, family, name, path):
    return {
        "before": live,
        "after": wanted,
        "before_header": "kernel: table %s %s" % (family, name),
        "after_header": path,
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            family=dict(type="str", default="inet", choices=["ip", "ip6", "inet", "arp", "bridge", "netdev"]),
            name=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    path, family, name = module.params["path"], module.params["family"], module.params["name"]
    if not os.path.isfile(path):
        module.fail_json(msg="path: %s does not exist on the node; write the ruleset file first" % path)
    nft = module.get_bin_path("nft", required=True)

    live = _live(module, nft, family, name)
    wanted = _in_namespace(module, nft, path, family, name)
    if wanted is None:
        if module.check_mode:
            # Unknown is not "in sync": say so, as a skip the drift scan
            # reports as could-not-verify.
            module.exit_json(
                skipped=True, changed=False, live=live, method="reload",
                msg="check mode cannot compare table %s %s with %s: reading the file's rules needs a network "
                    "namespace (unshare --net), and this node has no CAP_SYS_ADMIN" % (family, name, path))
        # Loading the file replaces the table in one transaction; what the
        # kernel lists afterwards is the file's table.
        _load(module, nft, path)
        after = _live(module, nft, family, name)
        module.exit_json(changed=after != live, live=live, wanted=after, method="reload",
                         diff=_diff(live, after, family, name, path))

    result = dict(changed=live != wanted, live=live, wanted=wanted, method="namespace",
                  diff=_diff(live, wanted, family, name, path))
    if result["changed"] and not module.check_mode:
        _load(module, nft, path)
        now = _live(module, nft, family, name)
        if now != wanted:
            module.fail_json(msg="after nft -f %s the kernel's table %s %s still differs from the file" % (path, family, name),
                             **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
