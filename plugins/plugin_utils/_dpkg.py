# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg's own list of what a node has installed, read on the controller's
side of an action: one ``dpkg-query`` (a few milliseconds) where apt's
Python bindings open apt's whole cache (about 65,000 packages; 0.4 to 0.7 s
a call on a test node).

Private to gpufleet.cloud: gpufleet.cloud.node_facts reads the packages
through it in check mode, gpufleet.cloud.apt_install to skip apt where
everything is installed already.
"""

from __future__ import annotations

import re

# The node's architecture first (a package's name leaves it out, as apt's
# does), then one line per package dpkg knows.
DPKG_QUERY = ("dpkg --print-architecture && "
              "dpkg-query --show --showformat '${Package}\\t${Version}\\t${Architecture}\\t${db:Status-Abbrev}\\n'")
# A package dpkg knows but has no version of on the node (the second letter
# of its status): not installed, or only its configuration files left.
NOT_INSTALLED = ("n", "c")
# What apt's name and version patterns may hold (fnmatch), and the version
# operators its specs take.
GLOB = re.compile(r"[*?\[]")
SPEC = re.compile(r"^(?P<name>[^=<>]+?)(?:(?P<op>>?=)(?P<version>.*))?$")


def dpkg_rows(stdout):
    """DPKG_QUERY's output: (the node's architecture, [(name, version,
    arch, status), ...]); ValueError where it is not that."""
    lines = stdout.splitlines()
    if not lines or not lines[0].strip():
        raise ValueError("dpkg printed no architecture")
    rows = []
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != 4:
            raise ValueError("dpkg-query printed %r, not four tab-separated fields" % line)
        rows.append(tuple(fields))
    return lines[0].strip(), rows


def apt_name(name, arch, native):
    """A package as apt names it: name:arch for another architecture than
    the node's; one of every architecture (all) is not."""
    return name if arch in (native, "all") else "%s:%s" % (name, arch)


def dpkg_packages(stdout):
    """DPKG_QUERY's output as ansible.builtin.package_facts gives the
    packages: name -> one dict per installed architecture (name, version,
    arch, source)."""
    native, rows = dpkg_rows(stdout)
    packages = {}
    for name, version, arch, status in rows:
        if len(status) < 2 or status[1] in NOT_INSTALLED:
            continue
        name = apt_name(name, arch, native)
        packages.setdefault(name, []).append({"name": name, "version": version, "arch": arch, "source": "dpkg"})
    return packages


def needs_apt(specs, stdout):
    """Of `specs` (apt's install specs: name, name:arch, name=version), the
    ones ansible.builtin.apt with state=present could act on, given
    DPKG_QUERY's output: not fully installed (dpkg's status other than
    installed, or an error flag), another version installed, or a spec only
    apt can decide (a name pattern, a version pattern, which apt may move
    to a newer match, or >=). An empty list: apt would change nothing."""
    native, rows = dpkg_rows(stdout)
    installed = {}
    for name, version, arch, status in rows:
        # "ii " or "hi ": wanted installed (or held), installed, no error.
        if len(status) >= 2 and status[1] == "i" and status[2:].strip() == "":
            installed[apt_name(name, arch, native)] = version
    left = []
    for spec in specs:
        match = SPEC.match(spec)
        if not match or GLOB.search(spec) or match.group("op") == ">=":
            left.append(spec)
            continue
        have = installed.get(match.group("name"))
        wanted = match.group("version")
        if have is None or (wanted is not None and have != wanted):
            left.append(spec)
    return left
