# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.cloud.sysctl: ansible.posix.sysctl, with the values it found
(see plugins/modules/sysctl.py for the documentation).

ansible.posix.sysctl returns only whether it changed something, so a drift
scan could say that a kernel parameter differs but not what it is. This
reads the parameter's line in the file and its running value first (slurp,
which reads in check mode too), then lets ansible.posix.sysctl decide and
change, and adds a diff of what it found against what it wants."""

from __future__ import annotations

import base64

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

SYSCTL_FILE = "/etc/sysctl.conf"


def proc_path(name):
    """/proc/sys's path for a parameter: dots separate levels, and a slash
    in the name stands for a dot within one (an interface such as eth0.1)."""
    return "/proc/sys/" + name.translate(str.maketrans("./", "/."))


def normalise(value):
    """A value as ansible.posix.sysctl compares it: booleans as 1 and 0,
    whitespace between fields collapsed."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return " ".join(str(value).split())


def file_value(text, name):
    """The value the file gives `name` (the last line that sets it wins, as
    sysctl reads it), or None."""
    found = None
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip().lstrip("-") == name:
            found = normalise(value)
    return found


def sysctl_diff(name, wanted, state, sysctl_file, in_file, running, kernel):
    """The diff entry: the file's line and, where the task sets the kernel
    too, the running value, found against wanted."""
    def lines(file_part, kernel_part):
        out = "%s: %s\n" % (sysctl_file, file_part)
        if kernel:
            out += "running: %s\n" % kernel_part
        return out

    absent = "(not set)"
    before = lines(absent if in_file is None else "%s = %s" % (name, in_file),
                   "(not readable)" if running is None else running)
    if state == "absent":
        after = lines(absent, running if running is not None else "(not readable)")
    else:
        after = lines("%s = %s" % (name, wanted), wanted)
    return {"before_header": "%s (found)" % name, "after_header": "%s (wanted)" % name,
            "before": before, "after": after}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _slurp(self, path, task_vars):
        """The file's text, or None when it cannot be read (missing, or a
        parameter this kernel does not have)."""
        result = self._execute_module(module_name="ansible.builtin.slurp", module_args={"src": path},
                                      task_vars=task_vars)
        if result.get("failed") or "content" not in result:
            return None
        return base64.b64decode(result["content"]).decode("utf-8", "replace")

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        name = str(args.get("name") or args.get("key") or "").strip()
        sysctl_file = args.get("sysctl_file") or SYSCTL_FILE
        state = args.get("state") or "present"
        try:
            kernel = boolean(args.get("sysctl_set", False)) or boolean(args.get("reload", True))
        except TypeError:
            kernel = True  # ansible.posix.sysctl refuses the value below
        in_file = running = None
        if name:
            in_file = file_value(self._slurp(sysctl_file, task_vars), name)
            if kernel:
                text = self._slurp(proc_path(name), task_vars)
                running = None if text is None else normalise(text)
        result.update(self._execute_module(module_name="ansible.posix.sysctl", module_args=args,
                                           task_vars=task_vars))
        if result.get("changed") and not result.get("failed"):
            result["diff"] = sysctl_diff(name, normalise(args.get("value", args.get("val", ""))), state, sysctl_file, in_file,
                                         running, kernel)
        return result
