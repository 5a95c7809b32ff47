# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg's own list of what a node has installed, read on the controller's
side of an action: one ``dpkg-query`` (a few milliseconds) where apt's
Python bindings open apt's whole cache (about 65,000 packages; 0.4 to 0.7 s
a call on a test node).

Private to gpufleet.cloud: gpufleet.cloud.node_facts reads the packages
through it, gpufleet.cloud.apt_install (with apt's marks and apt-cache
policy's version tables) to skip apt where apt would do nothing.
"""

from __future__ import annotations

import fnmatch
import re
import shlex

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


# The sections of install_read()'s output, each after its own line.
AUTO_MARK = "== apt extended_states =="
POLICY_MARK = "== apt-cache policy =="
VERSION_LINE = re.compile(r"^ (?:\*\*\*| {3}) (\S+) -?\d+$")
PACKAGE_LINE = re.compile(r"^(\S+):$")


def parse_spec(spec):
    """(name, version or None, whether only apt can decide it): a name
    pattern, >=, or what is not a spec at all."""
    match = SPEC.match(spec)
    if not match or GLOB.search(match.group("name")) or match.group("op") == ">=":
        return spec, None, True
    return match.group("name"), match.group("version"), False


def install_read(specs):
    """The shell script whose output needs_apt reads for `specs`: dpkg's
    list, apt's marks of what it installed as a dependency, and, for specs
    with a version pattern, the versions apt knows of each (apt-cache
    policy, a few hundredths of a second: it does not build apt's whole
    cache as apt's Python bindings do)."""
    patterned = [name for name, version, apt_only in map(parse_spec, specs)
                 if not apt_only and version is not None and GLOB.search(version)]
    script = "%s; echo '%s'; cat /var/lib/apt/extended_states 2>/dev/null" % (DPKG_QUERY, AUTO_MARK)
    if patterned:
        script += "; echo '%s'; LC_ALL=C apt-cache policy -- %s" % (
            POLICY_MARK, " ".join(shlex.quote(name) for name in patterned))
    return script


def auto_installed(text, native):
    """Packages apt marked as installed as a dependency (extended_states:
    Auto-Installed: 1), named as apt names them."""
    marked = set()
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in fields.items()}
        if fields.get("Auto-Installed") == "1" and fields.get("Package"):
            marked.add(apt_name(fields["Package"], fields.get("Architecture", native), native))
    return marked


def policy_versions(text):
    """apt-cache policy's version table of each package: name -> versions."""
    versions, name = {}, None
    for line in text.splitlines():
        header = PACKAGE_LINE.match(line)
        if header:
            name = header.group(1)
            versions[name] = []
            continue
        found = VERSION_LINE.match(line)
        if found and name is not None:
            versions[name].append(found.group(1))
    return versions


def needs_apt(specs, stdout):
    """Of `specs` (apt's install specs: name, name:arch, name=version), the
    ones ansible.builtin.apt with state=present could act on, given
    install_read(specs)'s output: not fully installed (dpkg's status other
    than installed, or an error flag), another version installed, marked
    as installed as a dependency (apt marks what a task names as installed
    by hand, even when it installs nothing), a version pattern that another
    version apt knows also matches (apt would move to the newest match), or
    a spec only apt can decide (a name pattern, >=). An empty list: apt
    would change nothing. ValueError where dpkg's list is not readable."""
    dpkg_part, _mark, rest = stdout.partition(AUTO_MARK + "\n")
    auto_part, _mark, policy_part = rest.partition(POLICY_MARK + "\n")
    native, rows = dpkg_rows(dpkg_part)
    installed = {}
    for name, version, arch, status in rows:
        # "ii " or "hi ": wanted installed (or held), installed, no error.
        if len(status) >= 2 and status[1] == "i" and status[2:].strip() == "":
            installed[apt_name(name, arch, native)] = version
    auto = auto_installed(auto_part, native)
    known = policy_versions(policy_part)
    left = []
    for spec in specs:
        name, wanted, apt_only = parse_spec(spec)
        have = installed.get(name)
        if apt_only or have is None or name in auto:
            left.append(spec)
        elif wanted is None:
            continue
        elif not GLOB.search(wanted):
            if have != wanted:
                left.append(spec)
        elif [version for version in known.get(name, []) if fnmatch.fnmatchcase(version, wanted)] != [have]:
            # apt takes the newest version the pattern matches: only where the
            # installed one is the only match is there nothing to move to.
            left.append(spec)
    return left
