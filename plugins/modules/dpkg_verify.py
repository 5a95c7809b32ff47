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
module: dpkg_verify
short_description: Check installed packages' files against dpkg's checksums, and reinstall those that differ
version_added: 0.1.0
description:
  - Runs C(dpkg --verify) for each installed package of O(packages) and
    reports the files that are missing or whose checksum differs from what
    the package shipped, as a diff.
  - The case this is for on GPU nodes is NVIDIA's C(.run) installer written
    over the packaged driver libraries; apt and dpkg's database still say
    the package is installed at the pinned version.
  - Configuration files (dpkg's conffiles) are listed and marked as such,
    but count only with O(conffiles=true), because the roles write several
    of them on purpose, and their own tasks compare those files.
  - When files differ, a normal run reinstalls exactly the installed
    version of the affected packages (C(apt-get install --reinstall)), then
    verifies again and fails if a file still differs.
  - A package that is not installed is left to the task that installs it,
    and returned in RV(not_installed).
  - A file that dpkg's own C(path-exclude) filters keep off the disk (the
    documentation, on minimal cloud images) is not missing.
author: gpufleet developers (@gpufleet)
requirements:
  - dpkg 1.17 or later, and apt-get for the reinstall (Debian and Ubuntu)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: C(dpkg --verify) only reads, so check mode reports exactly what a run would reinstall.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Before lists the files that differ, one per line; after lists only those that do not count (conffiles).
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: debian
options:
  packages:
    description: The packages whose files are checked, by name.
    type: list
    elements: str
    required: true
  conffiles:
    description: Whether a changed or missing configuration file counts as a difference.
    type: bool
    default: false
seealso:
  - name: dpkg(1)
    description: C(--verify) and its output format.
    link: https://manpages.debian.org/stable/dpkg/dpkg.1.en.html
"""

EXAMPLES = r"""
- name: Verify the files of the driver packages
  gpufleet.cloud.dpkg_verify:
    packages: [nvidia-smi, libcuda1, libnvidia-ml1]
"""

RETURN = r"""
files:
  description: Each file that differs, with its package, whether it is a conffile, and what differs.
  returned: success
  type: list
  elements: dict
  sample: [{"package": "libnvidia-ml1", "path": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.247.01",
            "problem": "checksum differs", "conffile": false, "counts": true}]
reinstalled:
  description: The packages reinstalled (name=version); empty in check mode.
  returned: success
  type: list
  elements: str
not_installed:
  description: Packages of O(packages) that are not installed, so not checked.
  returned: success
  type: list
  elements: str
"""

import fnmatch
import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

# dpkg's configuration: path-exclude filters keep files of a package off the
# disk on purpose (documentation on minimal cloud images), and dpkg --verify
# still reports those files as missing.
DPKG_CFG_DIR = "/etc/dpkg"
_FILTER = re.compile(r"^(path-exclude|path-include)[\s=]+(\S+)\s*$")


def _path_filters():
    """dpkg's path filters in the order dpkg reads them: the fragments in
    dpkg.cfg.d, then dpkg.cfg. The last filter that matches a path wins."""
    files = sorted(glob.glob(os.path.join(DPKG_CFG_DIR, "dpkg.cfg.d", "*"))) + [os.path.join(DPKG_CFG_DIR, "dpkg.cfg")]
    filters = []
    for path in files:
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
        except (IOError, OSError):
            continue
        for line in lines:
            match = _FILTER.match(line.strip())
            if match:
                filters.append((match.group(1) == "path-exclude", match.group(2)))
    return filters


def _excluded(path, filters):
    excluded = False
    for exclude, pattern in filters:
        if fnmatch.fnmatchcase(path, pattern):
            excluded = exclude
    return excluded


def _installed(module, names):
    """name -> version of the packages of `names` that are installed."""
    # dpkg-query exits 1 when a name is unknown; it still lists the others.
    _rc, out, _err = module.run_command(
        ["dpkg-query", "--show", "--showformat", "${Package}\\t${Version}\\t${db:Status-Status}\\n"] + names)
    versions = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[2] == "installed":
            versions[fields[0].split(":", 1)[0]] = fields[1]
    return versions


def _parse(package, text):
    """dpkg --verify's lines: nine flags (or 'missing'), an attribute column
    ('c' for a conffile), then the path."""
    files = []
    for line in text.splitlines():
        if len(line) < 13:
            continue
        flags, attribute, path = line[:9].strip(), line[10], line[12:]
        problem = "missing" if flags == "missing" else ("checksum differs" if "5" in flags else "differs (%s)" % flags)
        files.append({"package": package, "path": path, "problem": problem, "conffile": attribute == "c"})
    return files


def _verify(module, versions, conffiles):
    filters = _path_filters()
    files = []
    for package in sorted(versions):
        rc, out, err = module.run_command(["dpkg", "--verify", package])
        if rc != 0:
            module.fail_json(msg="dpkg --verify %s failed (rc %s): %s" % (package, rc, err.strip()))
        # A file dpkg was told not to install is not missing.
        files.extend(f for f in _parse(package, out)
                     if not (f["problem"] == "missing" and _excluded(f["path"], filters)))
    for f in files:
        f["counts"] = conffiles or not f["conffile"]
    return files


def _line(f):
    return "%s: %s (%s%s)" % (f["package"], f["path"], f["problem"], ", conffile" if f["conffile"] else "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", required=True),
            conffiles=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    names = [n for n in module.params["packages"] if n]
    if not names:
        module.fail_json(msg="packages: give at least one package name")
    conffiles = module.params["conffiles"]
    versions = _installed(module, names)
    not_installed = [n for n in names if n.split(":", 1)[0] not in versions]
    files = _verify(module, versions, conffiles)
    counted = [f for f in files if f["counts"]]
    result = dict(
        changed=bool(counted), files=files, reinstalled=[], not_installed=not_installed,
        diff=dict(before="".join(_line(f) + "\n" for f in files),
                  after="".join(_line(f) + "\n" for f in files if not f["counts"]),
                  before_header="files that differ from dpkg's checksums",
                  after_header="as the packages ship them"),
    )
    if counted and not module.check_mode:
        # Exactly the installed version: a repair, never an upgrade.
        targets = sorted({"%s=%s" % (f["package"], versions[f["package"]]) for f in counted})
        argv = ["apt-get", "install", "--reinstall", "--yes", "--no-install-recommends",
                "--allow-change-held-packages", "-o", "Dpkg::Options::=--force-confold"] + targets
        rc, _out, err = module.run_command(argv, environ_update={"DEBIAN_FRONTEND": "noninteractive"})
        if rc != 0:
            module.fail_json(msg="reinstalling %s failed (rc %s): %s" % (" ".join(targets), rc, err.strip()[-2000:]),
                             **result)
        result["reinstalled"] = targets
        still = [f for f in _verify(module, versions, conffiles) if f["counts"]]
        if still:
            module.fail_json(msg="after the reinstall these files still differ: %s" % ", ".join(f["path"] for f in still),
                             **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
