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
module: sshd_overrides
short_description: Find, and comment out, the sshd lines that override hardened settings
version_added: 0.1.0
description:
  - sshd keeps the first value it reads for most keywords, and a C(Match)
    block changes them again for the connections it matches. So a drop-in
    can hold exactly the hardened settings while sshd runs others, set by a
    line it reads first (a drop-in that sorts earlier, a line of
    C(sshd_config) before the C(Include), a file that an earlier
    C(Include) names) or by a C(Match) block in any file it reads.
  - This module reads the files the way sshd does, from O(config) through
    every C(Include) (relative paths are relative to the directory of
    O(config), globs in sorted order, C(Match) scope carried into included
    files), and returns each line outside O(managed) that sets a keyword of
    O(settings) to another value and takes effect.
  - A line takes effect when it comes before the O(managed) file's line for
    its keyword at global scope (sshd keeps the first value), or when it is
    in a C(Match) block (it applies to the connections the block matches).
    C(AllowGroups), C(AllowUsers), C(DenyGroups) and C(DenyUsers) lines at
    global scope add to the list wherever they are, so each one outside
    O(managed) counts.
  - With O(disable=true), each such line is commented out where it is, its
    text kept after a C(gpufleet-disabled) marker so that an operator finds
    it; C(sshd -t) must accept the result, or every file is put back and
    the task fails. With O(disable=false) nothing is changed, and the lines
    found are only returned (a report).
  - sshd is not restarted here; notify a handler that restarts it.
author: gpufleet developers (@gpufleet)
requirements:
  - OpenSSH's sshd on the target (for the check of the result)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: Each file with a line to comment out, before and after.
  platform:
    platforms: posix
options:
  config:
    description: sshd's main configuration file.
    type: path
    default: /etc/ssh/sshd_config
  managed:
    description: The drop-in that holds the hardened settings; its lines never count as overrides.
    type: path
    required: true
  settings:
    description:
      - The hardened keywords and their values, as C(sshd -T) prints them
        (keywords in any case; C(without-password) and
        C(prohibit-password) are the same value).
    type: dict
    required: true
  disable:
    description: Comment out the overriding lines (V(true)), or only return them (V(false)).
    type: bool
    default: true
seealso:
  - module: gpufleet.cloud.unit_dropins
  - name: sshd_config(5)
    description: First obtained value wins; Include and Match.
    link: https://man.openbsd.org/sshd_config
"""

EXAMPLES = r"""
- name: Comment out the sshd lines that override the hardening
  gpufleet.cloud.sshd_overrides:
    managed: /etc/ssh/sshd_config.d/00-gpufleet-security.conf
    settings:
      passwordauthentication: "no"
      permitrootlogin: "no"
  notify: Restart sshd

- name: Only report them
  gpufleet.cloud.sshd_overrides:
    managed: /etc/ssh/sshd_config.d/00-gpufleet-security.conf
    settings:
      passwordauthentication: "no"
    disable: false
  register: sshd_overrides
"""

RETURN = r"""
overrides:
  description: Each line that overrides a hardened setting (C(match) is the Match block's criteria, or null at global scope).
  returned: success
  type: list
  elements: dict
  sample: [{"path": "/etc/ssh/sshd_config.d/00-local.conf", "line": 1, "keyword": "passwordauthentication",
            "value": "yes", "text": "PasswordAuthentication yes", "match": null}]
lines:
  description: "Each overriding line as C(PATH:LINE: TEXT), with its Match block's criteria."
  returned: success
  type: list
  elements: str
  sample: ["/etc/ssh/sshd_config:130: PasswordAuthentication yes (in Match Address 10.9.0.0/16)"]
disabled:
  description: The lines commented out, as C(PATH:LINE) (empty in check mode and with O(disable=false)).
  returned: success
  type: list
  elements: str
"""

import glob
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule

MARKER = "# gpufleet-disabled (it overrode the security role's hardening): "
# sshd adds every such line's names to one list instead of keeping the first.
APPENDING = frozenset(("allowgroups", "allowusers", "denygroups", "denyusers"))
# sshd's own limit on nested Include (READCONF_MAX_DEPTH).
MAX_DEPTH = 16
_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)(?:\s*=\s*|\s+|$)(.*?)\s*$")
_SAME = {"without-password": "prohibit-password"}


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def parse_line(raw):
    """(keyword in lower case, value) of a configuration line, or None for
    a blank line or a comment."""
    if not raw.strip() or raw.lstrip().startswith("#"):
        return None
    found = _LINE.match(raw)
    if not found:
        return None
    return found.group(1).lower(), found.group(2)


def _value(value):
    value = value.strip()
    if len(value) > 1 and value[0] == value[-1] == '"':
        value = value[1:-1]
    value = " ".join(value.split()).lower()
    return _SAME.get(value, value)


def read_config(config, read=_read, expand=glob.glob):
    """Every keyword line sshd reads, in its order: dicts of path, line,
    keyword, value, text and match (the Match criteria in force, or None)."""
    base = os.path.dirname(config)
    lines = []

    def walk(path, match, depth):
        text = read(path)
        if text is None or depth > MAX_DEPTH:
            return
        for number, raw in enumerate(text.splitlines(), 1):
            parsed = parse_line(raw)
            if parsed is None:
                continue
            keyword, value = parsed
            if keyword == "match":
                # A Match block lasts to the next Match or the end of its file.
                match = value
            elif keyword == "include":
                for pattern in value.split():
                    pattern = pattern.strip('"')
                    if not os.path.isabs(pattern):
                        pattern = os.path.join(base, pattern)
                    for included in sorted(expand(pattern)):
                        walk(included, match, depth + 1)
            else:
                lines.append(dict(path=path, line=number, keyword=keyword, value=value, text=raw.strip(),
                                  match=match))

    walk(config, None, 0)
    return lines


def find_overrides(lines, managed, settings):
    """The lines that override `settings` (keyword -> value) over the
    managed file's, in the order sshd reads them."""
    want = dict((k.lower(), _value(str(v))) for k, v in settings.items())
    settled = set()  # keywords whose global value is already decided
    overrides = []
    for entry in lines:
        keyword = entry["keyword"]
        if keyword not in want:
            continue
        if entry["path"] == managed:
            if entry["match"] is None:
                settled.add(keyword)
            continue
        differs = _value(entry["value"]) != want[keyword]
        if entry["match"] is not None:
            if differs:
                overrides.append(entry)
        elif keyword in APPENDING:
            overrides.append(entry)
        elif keyword not in settled:
            if differs:
                overrides.append(entry)
            else:
                # The same value read first: it wins, harmlessly, over
                # any later line.
                settled.add(keyword)
    return overrides


def disabled_text(text, numbers):
    """`text` with the lines numbered in `numbers` commented out."""
    out = []
    for number, raw in enumerate(text.splitlines(True), 1):
        if number in numbers:
            ending = raw[len(raw.rstrip("\r\n")):] or "\n"
            raw = MARKER + raw.strip() + ending
        out.append(raw)
    return "".join(out)


def describe(entry):
    where = " (in Match %s)" % entry["match"] if entry["match"] is not None else ""
    return "%s:%d: %s%s" % (entry["path"], entry["line"], entry["text"], where)


def _write(module, path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gpufleet-sshd-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    # atomic_move keeps the file's owner, mode and SELinux context.
    module.atomic_move(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="path", default="/etc/ssh/sshd_config"),
            managed=dict(type="path", required=True),
            settings=dict(type="dict", required=True),
            disable=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    config = module.params["config"]
    if _read(config) is None:
        module.fail_json(msg="config: %s cannot be read: is openssh-server installed?" % config)
    overrides = find_overrides(read_config(config), os.path.normpath(module.params["managed"]),
                               module.params["settings"])
    result = dict(changed=False, overrides=overrides, lines=[describe(entry) for entry in overrides], disabled=[])
    if not overrides:
        result["msg"] = "no line overrides the hardened sshd settings"
        module.exit_json(**result)
    said = "; ".join(result["lines"])
    if not module.params["disable"]:
        result["msg"] = "these lines override the hardened sshd settings: %s" % said
        module.exit_json(**result)
    by_file = {}
    for entry in overrides:
        by_file.setdefault(entry["path"], set()).add(entry["line"])
    before = dict((path, _read(path)) for path in by_file)
    after = dict((path, disabled_text(before[path], numbers)) for path, numbers in by_file.items())
    result["changed"] = True
    result["diff"] = [dict(before_header=path, before=before[path], after_header=path, after=after[path])
                      for path in sorted(by_file)]
    if module.check_mode:
        result["msg"] = "would comment out: %s" % said
        module.exit_json(**result)
    sshd = module.get_bin_path("sshd", opt_dirs=["/usr/sbin"], required=True)
    written = []
    try:
        for path in sorted(by_file):
            _write(module, path, after[path])
            written.append(path)
        rc, _out, err = module.run_command([sshd, "-t", "-f", config])
        if rc != 0:
            raise RuntimeError("sshd -t refused the result (rc %s): %s" % (rc, err.strip()))
    except (RuntimeError, IOError, OSError) as exc:
        for path in written:
            _write(module, path, before[path])
        module.fail_json(msg="could not comment out the overriding lines, every file is as it was: %s. The lines: %s"
                             % (exc, said), **result)
    result["disabled"] = ["%s:%d" % (entry["path"], entry["line"]) for entry in overrides]
    result["msg"] = ("commented out, each kept in its file after '%s': %s" % (MARKER.strip(), said))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
