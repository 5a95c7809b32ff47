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
module: service_config
short_description: Make a running service run the configuration its files hold
version_added: 0.1.0
description:
  - A daemon reads its configuration files when it starts. A file that holds
    the right content proves nothing about the daemon, which may have been
    started before the file last changed and never restarted, or started
    with other flags. This module reads what runs.
  - It compares the start time of the unit's main process (from
    C(/proc/PID/stat), against the kernel's uptime) with the modification
    time of every file in O(files). A file changed after the process
    started means the process runs the configuration from before.
  - With O(argv), it also compares the main process's command line
    (C(/proc/PID/cmdline)) with the one the configuration gives.
  - Either difference is a change. A normal run restarts the unit, reads it
    again and fails if it still differs (for example, when a drop-in under
    C(/etc/systemd/system/UNIT.d) sets other flags).
  - When systemd reports that the unit's files changed since it loaded them
    (C(NeedDaemonReload)), that is a change too; a normal run reloads
    systemd before the restart.
  - When no process runs (the unit is not installed, or not running), no
    process runs an older configuration, so check mode reports no change and
    says so (the task that installs or starts the unit reports that), and a
    normal run fails. When none of O(files) exists, check mode skips the
    task with the reason (a drift scan reports could-not-verify).
author: gpufleet developers (@gpufleet)
requirements:
  - systemd and a Linux /proc on the target
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Before is what runs (process, start time, command line), after what the files give.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  name:
    description: The systemd unit whose main process reads O(files).
    type: str
    required: true
  files:
    description:
      - The files the service reads when it starts, and the files that set
        how it starts (an C(EnvironmentFile), a unit drop-in).
      - A directory counts with every entry directly in it, so a drop-in
        added to it or removed from it counts too.
      - A path that does not exist is left out (a drop-in that may be
        absent); list at least one that exists.
    type: list
    elements: path
    required: true
  argv:
    description:
      - The command line the main process must run with, one element per
        argument, as the configuration gives it. Leave it out where the
        configuration does not set the command line.
    type: list
    elements: str
seealso:
  - module: ansible.builtin.systemd_service
  - name: proc(5)
    description: The process start time (field 22 of /proc/PID/stat) and /proc/uptime.
    link: https://man7.org/linux/man-pages/man5/proc.5.html
notes:
  - A service that re-reads its files on a reload signal keeps its start
    time. Its role must restart it, not reload it, for this comparison to
    hold.
"""

EXAMPLES = r"""
- name: Check that node_exporter runs its current configuration
  gpufleet.cloud.service_config:
    name: prometheus-node-exporter
    files:
      - /etc/default/prometheus-node-exporter
    argv:
      - /usr/bin/prometheus-node-exporter
      - --web.listen-address=127.0.0.1:9100

- name: Check that dockerd runs its current daemon.json
  gpufleet.cloud.service_config:
    name: docker
    files:
      - /etc/docker/daemon.json
      - /etc/systemd/system/docker.service.d
"""

RETURN = r"""
pid:
  description: The unit's main process, as systemd names it, before this task.
  returned: when the unit runs
  type: int
started:
  description: When that process started (seconds since the epoch).
  returned: when the unit runs
  type: float
running_argv:
  description: That process's command line.
  returned: when the unit runs
  type: list
  elements: str
changed_files:
  description: The files in O(files) that changed after the process started.
  returned: when the unit runs
  type: list
  elements: str
restarted:
  description: Whether this task restarted the unit.
  returned: success
  type: bool
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

# Both clocks this compares tick in hundredths of a second: a file written
# within this much of the start is not taken for a later change.
_SLACK_S = 0.05


def _unit(module, systemctl, name):
    rc, out, err = module.run_command([systemctl, "show", name, "-p", "LoadState", "-p", "ActiveState",
                                       "-p", "MainPID", "-p", "NeedDaemonReload"])
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed (rc %s): %s" % (name, rc, err.strip()))
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    pid = props.get("MainPID", "0")
    return (props.get("LoadState", "unknown"), props.get("ActiveState", "unknown"), int(pid) if pid.isdigit() else 0,
            props.get("NeedDaemonReload") == "yes")


def _process(pid):
    """(start time since the epoch, argv) of `pid`, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0")[:-1]]
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
    except (IOError, OSError, IndexError):
        return None
    # Field 22 counts clock ticks since boot; the age is taken against the
    # kernel's uptime, so a clock step since boot does not move it.
    age = uptime - int(fields[19]) / float(os.sysconf("SC_CLK_TCK"))
    return time.time() - age, argv


def _mtimes(paths):
    found = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        found[path] = os.stat(path).st_mtime
        if os.path.isdir(path):
            for entry in sorted(os.listdir(path)):
                full = os.path.join(path, entry)
                try:
                    found[full] = os.lstat(full).st_mtime
                except OSError:
                    pass  # removed while we looked: the directory's own time counts
    return found


def _stamp(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _compare(name, pid, started, argv, mtimes, want_argv):
    changed = sorted(p for p, m in mtimes.items() if m > started + _SLACK_S)
    reasons = []
    if changed:
        reasons.append("%s (pid %d) started at %s, before %s changed: it runs the configuration from before"
                       % (name, pid, _stamp(started), ", ".join(changed)))
    if want_argv is not None and argv != want_argv:
        reasons.append("%s (pid %d) runs %s, its configuration gives %s" % (name, pid, argv, want_argv))
    before = "pid %d started %s\nargv %s\n" % (pid, _stamp(started), " ".join(argv))
    after = "".join("%s changed %s\n" % (p, _stamp(m)) for p, m in sorted(mtimes.items()))
    if want_argv is not None:
        after += "argv %s\n" % " ".join(want_argv)
    diff = {"before": before, "after": after, "before_header": "running: %s" % name,
            "after_header": "configuration of %s" % name}
    return changed, reasons, diff


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            files=dict(type="list", elements="path", required=True),
            argv=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    name, files, want_argv = module.params["name"], module.params["files"], module.params["argv"]
    mtimes = _mtimes(files)
    if not mtimes:
        if module.check_mode:
            module.exit_json(skipped=True, changed=False, restarted=False,
                             msg="check mode: none of files (%s) exists yet, so there is no configuration of %s "
                                 "to compare" % (", ".join(files), name))
        module.fail_json(msg="files: none of %s exists on the node; list the files %s reads" % (", ".join(files), name))
    systemctl = module.get_bin_path("systemctl", required=True)

    load, active, pid, reload_pending = _unit(module, systemctl, name)
    running = _process(pid) if pid and active == "active" else None
    if running is None:
        why = ("unit %s is not installed" % name if load != "loaded"
               else "%s is not running (ActiveState=%s)" % (name, active))
        if module.check_mode:
            # Known, not unknown: no process runs an older configuration.
            # Whether it should run is the task that starts it's to report.
            module.exit_json(changed=False, restarted=False,
                             msg="%s: no process runs any configuration of it; the task that installs or starts "
                                 "it reports that" % why)
        module.fail_json(msg="%s; start it before comparing what it runs with its configuration" % why)

    started, argv = running
    changed, reasons, diff = _compare(name, pid, started, argv, mtimes, want_argv)
    if reload_pending:
        # systemd itself says its unit files changed since it loaded them:
        # a restart now would still run the old definition.
        reasons.append("systemd has not loaded the changed unit files of %s (NeedDaemonReload=yes)" % name)
    result = dict(changed=bool(reasons), restarted=False, pid=pid, started=started, running_argv=argv,
                  changed_files=changed, diff=diff)
    if reasons:
        result["msg"] = "; ".join(reasons)
    if not reasons or module.check_mode:
        module.exit_json(**result)

    found = result.pop("msg")
    if reload_pending:
        rc, _out, err = module.run_command([systemctl, "daemon-reload"])
        if rc != 0:
            module.fail_json(msg="systemctl daemon-reload failed (rc %s): %s" % (rc, err.strip()), **result)
    rc, _out, err = module.run_command([systemctl, "restart", name])
    if rc != 0:
        module.fail_json(msg="systemctl restart %s failed (rc %s): %s; see journalctl -u %s" % (name, rc, err.strip(), name),
                         **result)
    result["restarted"] = True
    _load, active, new_pid, _reload = _unit(module, systemctl, name)
    now = _process(new_pid) if new_pid and active == "active" else None
    if now is None:
        module.fail_json(msg="%s did not come back after its restart (ActiveState=%s); see journalctl -u %s"
                         % (name, active, name), **result)
    _changed, still, _diff = _compare(name, new_pid, now[0], now[1], _mtimes(files), want_argv)
    if still:
        unit = name if "." in name else name + ".service"
        module.fail_json(msg="after a restart: %s. Something other than its files sets how it starts (a unit "
                             "drop-in under /etc/systemd/system/%s.d?)" % ("; ".join(still), unit), **result)
    module.exit_json(msg="restarted %s: %s" % (name, found), **result)


if __name__ == "__main__":
    main()
