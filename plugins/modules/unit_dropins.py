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
module: unit_dropins
short_description: Move aside the drop-ins that override what a systemd unit's own file sets
version_added: 0.1.0
description:
  - A unit's file can hold exactly what a role wrote while systemd runs
    something else, because a drop-in under C(/etc/systemd/system/UNIT.d/) or
    C(/run/systemd/system/UNIT.d/) changes any setting of the unit (a
    timer's schedule, a service's C(ExecStart), C(Environment), C(User)).
    This module reads the drop-ins systemd loads for the unit
    (C(systemctl show -p DropInPaths)).
  - A drop-in under C(/etc) or C(/run) that is not in O(allowed) and sets a
    key that the unit's own file or an allowed drop-in sets overrides the
    unit; that is a change. A drop-in that only adds other keys is left
    alone and returned in RV(kept). Drop-ins that packages ship (under
    C(/usr/lib)) are the unit's own.
  - A normal run renames each overriding drop-in of the unit's own
    directory (C(UNIT.d)) to C(NAME.gpufleet-disabled) in the same directory
    (systemd reads only C(*.conf) there, and an operator finds it where it
    was), reloads systemd and restarts the unit if it runs, so that it runs
    without the override. An overriding drop-in shared with other units
    (C(service.d), a prefix such as C(gpufleet-.service.d)) is not moved,
    since that would change those units too; the task fails and names it.
  - With O(keys), only those settings count, whether or not the unit's own
    file sets them. For C(ssh.service) the command line and environment that
    can give sshd options matter, while an image's drop-in that generates
    host keys first does not.
  - A whole unit file under C(/etc) or C(/run) in place of the one its
    package ships (C(systemctl edit --full)) overrides each setting where
    the two differ; a normal run moves it aside the same way, so that
    systemd loads the package's file again. One that replaces a template
    (C(foo@.service)) serves every instance, and is named, not moved.
  - Where something overrides the unit, the diff's first part puts what
    systemd runs (C(systemctl show) of each overridden setting) next to what
    the unit's own file and allowed drop-ins set, before the files that do
    it.
  - A unit that is not loaded (not installed yet) is no change.
author: gpufleet developers (@gpufleet)
requirements:
  - systemd on the target
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: First the overridden settings as systemd runs them (C(systemctl show)) against the unit's own;
      then each overriding drop-in's content against nothing (it is moved aside), and for a whole unit file,
      against the package's file.
  platform:
    platforms: posix
options:
  name:
    description: The systemd unit, with its type (C(gpufleet-backup.timer), C(docker.service)).
    type: str
    required: true
  allowed:
    description:
      - Drop-ins that belong to the unit's configuration (a role writes
        them); they are never moved, and the keys they set count as the
        unit's own.
    type: list
    elements: path
    default: []
  keys:
    description:
      - The settings (C(Section.Key), such as C(Service.ExecStart)) that
        count as overrides wherever a drop-in sets them. Without it, every
        setting the unit's own file or an allowed drop-in sets counts.
    type: list
    elements: str
  restart:
    description:
      - Whether to restart the unit when it runs and a drop-in was moved
        aside. With V(false), systemd is reloaded and the unit runs without
        the override from its next start. For a unit whose restart would
        undo what it guards (C(nftables.service) removes the firewall's
        table before it loads it again) or stop what is in use (a storage
        unlock unit unmounts its volume), while the role keeps the live
        state by other means.
    type: bool
    default: true
seealso:
  - module: ansible.builtin.systemd_service
  - module: gpufleet.cloud.service_config
  - name: systemd.unit(5)
    description: Drop-in directories and the order systemd reads them in.
    link: https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html
"""

EXAMPLES = r"""
- name: Move aside drop-ins that override the backup timer
  gpufleet.cloud.unit_dropins:
    name: gpufleet-backup.timer

- name: Move aside drop-ins that override chrony, keeping the role's own
  gpufleet.cloud.unit_dropins:
    name: chrony.service
    allowed:
      - /etc/systemd/system/chrony.service.d/90-gpufleet-container.conf

- name: Move aside drop-ins that give sshd other options
  gpufleet.cloud.unit_dropins:
    name: ssh.service
    keys: [Service.ExecStart, Service.Environment, Service.EnvironmentFile]

- name: Move aside drop-ins that change how nftables loads, without a restart
  gpufleet.cloud.unit_dropins:
    name: nftables.service
    allowed: [/etc/systemd/system/nftables.service.d/90-gpufleet.conf]
    restart: false
"""

RETURN = r"""
overrides:
  description: The overriding drop-ins found, each with the keys it overrides (C(Section.Key)).
  returned: success
  type: list
  elements: dict
  sample: [{"path": "/etc/systemd/system/gpufleet-backup.timer.d/weekly.conf", "keys": ["Timer.OnCalendar"]}]
moved:
  description: Where each overriding drop-in was moved to (empty in check mode).
  returned: success
  type: list
  elements: str
kept:
  description: Drop-ins under C(/etc) or C(/run) that add settings without overriding any the unit sets.
  returned: success
  type: list
  elements: str
running:
  description:
    - Each overridden setting's C(systemctl show) property as systemd runs it (C(TimersCalendar) for
      C(Timer.OnCalendar), C(TimersMonotonic) for the C(On*Sec) timers, C(EnvironmentFiles) for
      C(Service.EnvironmentFile), otherwise the key's own name). A timer setting shows both timer
      lists, since an empty assignment to any of them resets all. Empty when nothing overrides the
      unit, null when C(systemctl show) failed.
  returned: success
  type: dict
  sample: {"TimersCalendar": "{ OnCalendar=weekly ; next_elapse=Mon 2026-12-07 00:00:00 UTC }"}
restarted:
  description: Whether this task restarted the unit.
  returned: success
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule

SUFFIX = ".gpufleet-disabled"
# Where an administrator's or a runtime drop-in lives; /usr/lib's come with
# the package that ships the unit.
_LOCAL = ("/etc/systemd/", "/run/systemd/")
# Where packages put the units they ship.
_VENDOR = ("/usr/lib/systemd/system", "/lib/systemd/system")
# The `systemctl show` properties of a Section.Key where the names differ.
# An empty assignment to any timer setting resets every timer of the unit,
# monotonic and calendar alike, so a timer's settings show both lists.
_TIMERS = ("TimersMonotonic", "TimersCalendar")
_SHOWN_AS = {
    "Timer.OnCalendar": _TIMERS,
    "Timer.OnActiveSec": _TIMERS,
    "Timer.OnBootSec": _TIMERS,
    "Timer.OnStartupSec": _TIMERS,
    "Timer.OnUnitActiveSec": _TIMERS,
    "Timer.OnUnitInactiveSec": _TIMERS,
    "Service.EnvironmentFile": ("EnvironmentFiles",),
}


def parse_settings(text):
    """Each Section.Key a unit file or drop-in sets, with its values in
    order (a continued line joined to its first)."""
    settings = {}
    section = None
    last = None
    for raw in text.splitlines():
        line = raw.strip()
        if last is not None:
            settings[last][-1] += " " + line.rstrip("\\").strip()
            if not line.endswith("\\"):
                last = None
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if "=" in line and section:
            key, value = line.split("=", 1)
            name = "%s.%s" % (section, key.strip())
            settings.setdefault(name, []).append(value.strip().rstrip("\\").strip())
            if line.endswith("\\"):
                last = name
    return settings


def parse_keys(text):
    """The Section.Key names a unit file or drop-in sets (an empty
    assignment, which resets a list, counts: it is what an override of
    ExecStart starts with)."""
    return set(parse_settings(text))


def vendor_unit(name):
    """The file a package ships for the unit (a template's for an
    instance: foo@.service for foo@bar.service), or None."""
    if "@" in name:
        prefix, rest = name.split("@", 1)
        name = prefix + "@" + rest[rest.rfind("."):]
    for place in _VENDOR:
        if os.path.exists(os.path.join(place, name)):
            return os.path.join(place, name)
    return None


def find_replacement(fragment, vendor, keys=None, read=None):
    """A whole unit file under /etc or /run that replaces the package's own
    (`systemctl edit --full`), with the settings where the two differ (only
    `keys` when given); None when there is none or nothing counts."""
    read = read or _read
    if not fragment or not vendor or not fragment.startswith(_LOCAL):
        return None
    if os.path.realpath(fragment) == os.path.realpath(vendor):
        return None
    text = read(fragment)
    if text is None:
        return None
    mine, theirs = parse_settings(text), parse_settings(read(vendor) or "")
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if keys is not None:
        differ = [k for k in differ if k in keys]
    return {"path": fragment, "keys": differ, "content": text, "vendor": vendor} if differ else None


def shown_as(keys):
    """The `systemctl show` properties that these Section.Keys set, in
    order."""
    props = []
    for key in keys:
        for prop in _SHOWN_AS.get(key, (key.split(".", 1)[-1],)):
            if prop not in props:
                props.append(prop)
    return props


def wanted_settings(keys, own_text, allowed_texts):
    """What the unit's own file, then each allowed drop-in (which replaces
    a key it sets), gives each of `keys`; an empty value that only resets
    a list is left out."""
    wanted = {}
    for text in [own_text] + list(allowed_texts):
        for key, values in parse_settings(text or "").items():
            if key in keys:
                wanted[key] = [v for v in values if v] or values
    return wanted


def running_diff(name, keys, running, wanted):
    """The overridden settings as systemd runs them (None: systemctl show
    failed; a property it leaves out is empty) against the unit's own."""
    if running is None:
        header, found = "systemctl show failed: the files below show why", ""
    else:
        header = "systemctl show"
        found = "".join("%s=%s\n" % (p, running.get(p, "(none)")) for p in shown_as(keys))
    return dict(before_header="%s as systemd runs it (%s)" % (name, header), before=found,
                after_header="%s as its own file sets it" % name,
                after="".join("%s=%s\n" % (k, v) for k in keys for v in wanted.get(k) or ["(not set)"]))


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except (IOError, OSError):
        return None


def _show(module, systemctl, name, props):
    """(rc, stderr, {property: value}) of `systemctl show` for those
    properties; one it leaves out is not in the dict."""
    argv = [systemctl, "show", name]
    for prop in props:
        argv += ["-p", prop]
    rc, out, err = module.run_command(argv)
    return rc, err, dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}


def _own_directory(path, name):
    return os.path.basename(os.path.dirname(path)) == name + ".d"


def find_overrides(fragment_text, dropins, allowed, read=_read, keys=None):
    """(overrides, kept): each local drop-in not allowed that sets a key the
    unit's file or an allowed drop-in sets (or one of `keys` when given),
    with those keys; and the local ones that only add other keys."""
    if keys is not None:
        own = set(keys)
    else:
        own = parse_keys(fragment_text or "")
        for path in allowed:
            own |= parse_keys(read(path) or "")
    overrides, kept = [], []
    for path in dropins:
        if path in allowed or not path.startswith(_LOCAL):
            continue
        text = read(path)
        if text is None:
            continue
        keys = sorted(parse_keys(text) & own)
        if keys:
            overrides.append({"path": path, "keys": keys, "content": text})
        else:
            kept.append(path)
    return overrides, kept


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            allowed=dict(type="list", elements="path", default=[]),
            keys=dict(type="list", elements="str", no_log=False),
            restart=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    name = module.params["name"]
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, err, props = _show(module, systemctl, name, ("LoadState", "ActiveState", "FragmentPath", "DropInPaths"))
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed (rc %s): %s" % (name, rc, err.strip()))
    result = dict(changed=False, overrides=[], moved=[], kept=[], restarted=False, running={})
    if props.get("LoadState") != "loaded":
        result["msg"] = "%s is not loaded (%s): nothing overrides it" % (name, props.get("LoadState", "unknown"))
        module.exit_json(**result)
    dropins = props.get("DropInPaths", "").split()
    allowed = [os.path.normpath(p) for p in module.params["allowed"]]
    fragment = props.get("FragmentPath", "")
    overrides, kept = find_overrides(_read(fragment) if fragment else "", dropins, allowed, keys=module.params["keys"])
    replacement = None if fragment in allowed else find_replacement(fragment, vendor_unit(name), module.params["keys"])
    if replacement:
        overrides.insert(0, replacement)
    result["kept"] = kept
    result["overrides"] = [{"path": o["path"], "keys": o["keys"]} for o in overrides]
    if not overrides:
        module.exit_json(**result)
    result["changed"] = True
    keys = sorted(set(k for o in overrides for k in o["keys"]))
    # None when systemctl show fails: the files alone already show the
    # override.
    rc, _err, running = _show(module, systemctl, name, shown_as(keys))
    result["running"] = running if rc == 0 else None
    own = _read(replacement["vendor"]) if replacement else (_read(fragment) if fragment else "")
    wanted = wanted_settings(keys, own, [_read(p) for p in allowed if p in dropins])
    # A drop-in goes (nothing in its place); a whole file gives way to the
    # package's.
    result["diff"] = [running_diff(name, keys, result["running"], wanted)]
    result["diff"] += [dict(before_header=o["path"], before=o["content"],
                            after_header=o.get("vendor", o["path"] + SUFFIX),
                            after=(_read(o["vendor"]) or "") if "vendor" in o else "")
                       for o in overrides]
    said = "; ".join("%s overrides %s" % (o["path"], ", ".join(o["keys"])) for o in overrides)
    if module.check_mode:
        result["msg"] = "%s: %s" % (name, said)
        module.exit_json(**result)
    # A template's own file replaced under /etc serves every instance.
    shared = [o["path"] for o in overrides
              if not (_own_directory(o["path"], name) or o.get("vendor") and os.path.basename(o["path"]) == name)]
    for o in overrides:
        if o["path"] in shared:
            continue
        target = o["path"] + SUFFIX
        n = 1
        while os.path.exists(target):  # an earlier one moved aside stays too
            n += 1
            target = "%s%s.%d" % (o["path"], SUFFIX, n)
        try:
            os.rename(o["path"], target)
        except OSError as exc:
            module.fail_json(msg="%s: could not move %s aside: %s" % (name, o["path"], exc), **result)
        result["moved"].append(target)
    rc, _out, err = module.run_command([systemctl, "daemon-reload"])
    if rc != 0:
        module.fail_json(msg="systemctl daemon-reload failed (rc %s): %s" % (rc, err.strip()), **result)
    if result["moved"] and module.params["restart"] and props.get("ActiveState") in ("active", "activating",
                                                                                     "reloading"):
        rc, _out, err = module.run_command([systemctl, "restart", name])
        if rc != 0:
            module.fail_json(msg="systemctl restart %s failed (rc %s): %s" % (name, rc, err.strip()), **result)
        result["restarted"] = True
    if shared:
        module.fail_json(msg="%s: %s; %s also apply to other units, so they are not moved: remove those keys "
                             "there, or give this unit its own drop-in" % (name, said, ", ".join(shared)), **result)
    result["msg"] = "%s: %s; moved aside to %s" % (name, said, ", ".join(result["moved"]))
    if result["moved"] and not result["restarted"] and props.get("ActiveState") == "active":
        result["msg"] += "; not restarted (restart=false): it runs without them from its next start"
    module.exit_json(**result)


if __name__ == "__main__":
    main()
