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
module: apt_repo
short_description: Trust a flat apt repository only through its pinned key, and check that it has the wanted versions
version_added: 0.1.0
description:
  - Fetches the repository's signing key from O(key_url) and computes the
    fingerprint of each primary key in it from the key packets themselves
    (no gpg needed). The key is refused unless every primary key in the
    file is pinned in O(key_fingerprints), so a mirror or a proxy cannot
    hand out its own key, nor add one next to the real one.
  - With O(key_dest), writes the accepted key there (ASCII-armoured or
    binary, as fetched), for the repository's C(signed-by). Without it,
    only checks; a role's preflight uses it so to fail before changing
    anything.
  - With O(url), checks the repository as apt will, before apt is given
    it. Its C(InRelease) (else C(Release) with C(Release.gpg)) must carry a
    good signature by the accepted key, checked with C(gpgv), or with
    C(sqv) where apt brings that instead (Debian 13). The package index
    read must be the one that Release lists (SHA256). So a mirror
    re-signed with another key, an unsigned one, or one caught half-way
    through a sync is refused here, not at C(apt-get update) after the
    repository was added.
  - With O(packages), reads the repository's package index (C(Packages.gz),
    else C(Packages)) and fails when a package is missing, or has no version
    matching the wanted pattern, listing the versions the repository has.
  - Error messages name the role variables given in O(url_var),
    O(fingerprint_var) and O(version_var), so they point at what to fix.
author: gpufleet developers (@gpufleet)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Fetching and checking only read; in check mode the key file is compared, not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: Before and after are the fingerprints of the key file on disk and of the fetched key.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: debian
options:
  url:
    description:
      - The repository directory, a flat repository (suite C(/)) as
        NVIDIA's are. Needed with O(packages). When set, the repository's
        signature and index are checked too (see the description).
    type: str
    default: ""
  key_url:
    description: Where the repository's signing key is published (http, https or file URL).
    type: str
    required: true
  key_fingerprints:
    description:
      - The fingerprints (40 or 64 hex digits, spaces allowed) of the keys
        the repository may be signed with.
    type: list
    elements: str
    required: true
  key_dest:
    description: Where to write the accepted key. Empty checks only.
    type: path
    default: ""
  packages:
    description:
      - Packages the repository must have, each with a version pattern
        (a glob, as apt preferences' C(Pin) line takes a version).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The package name.
        type: str
        required: true
      version:
        description: The version pattern, for example C(580.95.05*); C(*) for any.
        type: str
        default: "*"
  url_var:
    description: The variable that sets the repository's URL, for error messages.
    type: str
    default: url
  fingerprint_var:
    description: The variable that sets the pinned fingerprints, for error messages.
    type: str
    default: key_fingerprints
  version_var:
    description: The variable that sets the wanted versions, for error messages.
    type: str
    default: version
  timeout:
    description: Seconds to wait for each download.
    type: int
    default: 30
seealso:
  - name: apt-secure(8)
    description: How apt uses the key named by C(signed-by).
    link: https://manpages.debian.org/stable/apt/apt-secure.8.en.html
  - name: RFC 9580, section 5.5.4
    description: How a key's fingerprint is computed.
    link: https://www.rfc-editor.org/rfc/rfc9580#name-key-ids-and-fingerprints
"""

EXAMPLES = r"""
- name: Refuse NVIDIA's repository unless it is signed by NVIDIA's key and has branch 580
  gpufleet.cloud.apt_repo:
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
    key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    key_fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]
    packages:
      - {name: nvidia-open-580, version: "580.95.05*"}
    url_var: nvidia_driver_mirror_url
    fingerprint_var: nvidia_driver_repo_key_fingerprints
    version_var: nvidia_driver_version
  check_mode: true

- name: Write the key that the repository's signed-by names
  gpufleet.cloud.apt_repo:
    key_url: https://nvidia.github.io/libnvidia-container/gpgkey
    key_fingerprints: [C95B321B61E88C1809C4F759DDCAE044F796ECB0]
    key_dest: /etc/apt/keyrings/gpufleet-nvidia-container-toolkit.asc
"""

RETURN = r"""
signed_by:
  description: The fingerprint of the key that signed the repository's Release, as gpgv or sqv reports it.
  returned: when O(url) is set
  type: str
  sample: EB693B3035CD5710E231E123A4B469963BF863CC
fingerprints:
  description: The fingerprints of the primary keys in the fetched key file.
  returned: success
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
versions:
  description: For each package of O(packages), every version the repository has.
  returned: when O(packages) is not empty
  type: dict
  sample: {"nvidia-open-580": ["580.65.06-1", "580.95.05-1"]}
"""

import fnmatch
import gzip
import hashlib
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.cloud.plugins.module_utils._openpgp import (
    KeyFileError,
    dearmor,
    normalise,
    primary_fingerprints,
)

# What gpgv's status lines mean for the user, worst first.
_GPGV_FAILURES = (
    ("NO_PUBKEY", "it is signed by key %s, which is not the pinned key"),
    ("BADSIG", "its signature does not match its content (key %s)"),
    ("EXPKEYSIG", "it is signed by key %s, which has expired"),
    ("REVKEYSIG", "it is signed by key %s, which was revoked"),
    ("EXPSIG", "its signature has expired (key %s)"),
)


def _fetch(module, url):
    """The body at url and None, or None and why not."""
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    # A file:// URL answers without an HTTP status.
    status = info.get("status")
    if response is None or (status is not None and not 200 <= status < 300):
        return None, "%s: %s" % (status, info.get("msg", "no answer"))
    return response.read(), None


def read_index(text):
    """{package: [version, ...]} from a Packages file."""
    found = {}
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in ("", " ", "\t") and ":" in line:
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        if "Package" in fields and "Version" in fields:
            found.setdefault(fields["Package"], []).append(fields["Version"])
    return found


def _signature_problem(status, err):
    """Why gpgv did not accept a signature, from its status lines."""
    words = [line.split()[1:] for line in status.splitlines() if line.startswith("[GNUPG:] ")]
    for keyword, why in _GPGV_FAILURES:
        for fields in words:
            if fields and fields[0] == keyword:
                return why % (fields[1] if len(fields) > 1 else "unknown")
    if not any(fields and fields[0] in ("ERRSIG", "BADSIG", "GOODSIG") for fields in words):
        return "it holds no signature gpgv can read (%s)" % (err.strip().splitlines() or ["no output"])[-1]
    return (err.strip().splitlines() or ["gpgv refused it"])[-1]


def _verifier(module):
    """gpgv, which reads every form of signature; else sqv, which Debian 13's
    apt (3.0) brings in its place, at 1.3 or later (cleartext included)."""
    for name in ("gpgv", "sqv"):
        path = module.get_bin_path(name)
        if path:
            return name, path
    module.fail_json(msg="neither gpgv nor sqv is on the node to check the repository's signature; apt brings one "
                     "of them (Debian packages gpgv, sqv).")
    return None, None


def _verify(module, work, keyring, signed, signature, release):
    """(signer's fingerprint or None, why not) for `signed` (cleartext when
    `signature` is None, else the data `signature` signs); the signed text
    is then in `release`."""
    name, path = _verifier(module)
    if name == "gpgv":
        command = [path, "--homedir", work, "--status-fd", "1", "--keyring", keyring]
        command += ["--output", release, signed] if signature is None else [signature, signed]
        rc, status, err = module.run_command(command)
        # VALIDSIG names the signing (sub)key, then its primary key last.
        signers = [line.split()[-1] for line in status.splitlines() if line.startswith("[GNUPG:] VALIDSIG ")]
        if rc == 0 and signers and "[GNUPG:] GOODSIG " in status:
            return signers[0], None
        return None, _signature_problem(status, err)
    command = [path, "--keyring", keyring]
    if signature is None:
        command += ["--output", release, "--cleartext", signed]
    else:
        command += ["--signature-file", signature, signed]
    rc, out, err = module.run_command(command)
    if rc == 0 and out.split():
        return out.split()[0], None
    missing = re.search(r"Missing key ([0-9A-Fa-f]+)", err)
    if missing:
        return None, "it is signed by key %s, which is not the pinned key" % missing.group(1)
    if "manipulated" in err:
        return None, "its signature does not match its content"
    return None, "sqv: %s" % " ".join(line.strip() for line in err.strip().splitlines()[-2:])


def verify_release(module, base, key):
    """The Release text, once it is found signed by `key` (the accepted key
    file), and the signer's fingerprint; fails naming the variables else."""
    params = module.params
    work = tempfile.mkdtemp(dir=module.tmpdir)
    keyring = os.path.join(work, "pinned.gpg")
    with open(keyring, "wb") as handle:
        handle.write(dearmor(key))
    release = os.path.join(work, "Release")
    inrelease, in_error = _fetch(module, base + "InRelease")
    if inrelease is not None:
        signed, signature = os.path.join(work, "InRelease"), None
        with open(signed, "wb") as handle:
            handle.write(inrelease)
    else:
        data, release_error = _fetch(module, base + "Release")
        if data is None:
            module.fail_json(msg="%s: the repository %s cannot be read (InRelease: %s; Release: %s). Check the URL, "
                             "that the node reaches it, and that it is a flat apt repository (InRelease or Release, "
                             "and Packages)." % (params["url_var"], base, in_error, release_error))
        detached, error = _fetch(module, base + "Release.gpg")
        if detached is None:
            module.fail_json(msg="%s: the repository %s is not signed: it has a Release but neither InRelease nor "
                             "Release.gpg (%s), and apt refuses an unsigned repository. Sign the mirror's Release "
                             "(the collection's docs/airgap.md) and pin that key in %s." % (
                                 params["url_var"], base, error, params["fingerprint_var"]))
        signed, signature = release, release + ".gpg"
        with open(release, "wb") as handle:
            handle.write(data)
        with open(signature, "wb") as handle:
            handle.write(detached)
    signer, problem = _verify(module, work, keyring, signed, signature, release)
    if signer is None:
        module.fail_json(msg="%s: the repository %s is not signed by the key pinned in %s: %s, so apt would refuse "
                         "it. A mirror must be signed by the key its key URL serves: a mirror copied from NVIDIA "
                         "keeps NVIDIA's key; a re-signed one publishes its own key and pins that key's "
                         "fingerprint." % (params["url_var"], base, params["fingerprint_var"], problem))
    with open(release, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace"), signer.upper()


def listed_sha256(release):
    """{file name: SHA256} from a Release file's SHA256 section."""
    listed, inside = {}, False
    for line in release.splitlines():
        if line[:1] not in (" ", "\t"):
            inside = line.strip() == "SHA256:"
            continue
        fields = line.split()
        if inside and len(fields) == 3:
            listed[fields[2]] = fields[0].lower()
    return listed


def check_packages(module, base, release):
    """Fail unless the index under `base` (ending in /) is the one the
    signed `release` lists, and each wanted package has a version matching
    its pattern."""
    params = module.params
    name = "Packages.gz"
    data, error = _fetch(module, base + name)
    if data is None:
        name = "Packages"
        data, error = _fetch(module, base + name)
    if data is None:
        module.fail_json(msg="%s: the repository %s cannot be read (%s). Check the URL, that the node reaches it, "
                         "and that it holds a Packages or Packages.gz index (a flat repository, suite /)." % (
                             params["url_var"], base, error))
    listed = listed_sha256(release).get(name)
    digest = hashlib.sha256(data).hexdigest()
    if listed != digest:
        module.fail_json(msg="%s: the repository %s serves a %s that its signed Release does not list (%s, read "
                         "%s): the mirror is half-way through a sync, stale, or altered. Sync it again, then "
                         "re-run." % (params["url_var"], base, name,
                                      "listed " + listed if listed else "not listed", digest))
    if name == "Packages.gz":
        try:
            data = gzip.decompress(data)
        except OSError as exc:
            module.fail_json(msg="%s: %sPackages.gz is not gzip data (%s); is this an apt repository directory?" % (
                params["url_var"], base, exc))
    index = read_index(data.decode("utf-8", errors="replace"))
    versions, problems = {}, []
    for package in params["packages"]:
        name, pattern = package["name"], package["version"] or "*"
        have = sorted(set(index.get(name, [])))
        versions[name] = have
        if not have:
            problems.append("%s is not in it" % name)
        elif not any(fnmatch.fnmatchcase(version, pattern) for version in have):
            problems.append("%s has no version %s (it has %s)" % (name, pattern, ", ".join(have)))
    if problems:
        module.fail_json(msg="%s: the repository %s does not have what is asked: %s." % (
            params["version_var"], base, "; ".join(problems)), versions=versions)
    return versions


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default=""),
            key_url=dict(type="str", required=True, no_log=False),
            key_fingerprints=dict(type="list", elements="str", required=True, no_log=False),
            key_dest=dict(type="path", default=""),
            packages=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                version=dict(type="str", default="*"),
            )),
            url_var=dict(type="str", default="url"),
            fingerprint_var=dict(type="str", default="key_fingerprints"),
            version_var=dict(type="str", default="version"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    pinned = [normalise(value) for value in params["key_fingerprints"]]
    bad = [value for value, norm in zip(params["key_fingerprints"], pinned) if norm is None]
    if bad or not pinned:
        module.fail_json(msg="%s: %s is not a key fingerprint; give the 40 hex digits (64 for a v6 key) that "
                         "`gpg --show-keys <key file>` prints." % (params["fingerprint_var"], bad or "an empty list"))
    if params["packages"] and not params["url"]:
        module.fail_json(msg="url is required with packages")

    data, error = _fetch(module, params["key_url"])
    if data is None:
        module.fail_json(msg="%s: the signing key at %s cannot be fetched (%s). Check the URL and that the node "
                         "reaches it." % (params["url_var"], params["key_url"], error))
    try:
        found = primary_fingerprints(data)
    except KeyFileError as exc:
        module.fail_json(msg="%s: %s is not an OpenPGP public key (%s); is the URL right?" % (
            params["url_var"], params["key_url"], exc))
    foreign = [value for value in found if value not in pinned]
    if foreign:
        module.fail_json(
            msg="%s: the key at %s has fingerprint %s, which is not pinned (%s pins %s). apt will not be given "
            "this key. If this is your own mirror, signed with your own key, set %s to that key's fingerprint." % (
                params["url_var"], params["key_url"], ", ".join(foreign), params["fingerprint_var"],
                ", ".join(pinned), params["fingerprint_var"]),
            fingerprints=found)

    result = dict(changed=False, fingerprints=found)
    if params["url"]:
        base = params["url"].rstrip("/") + "/"
        release, result["signed_by"] = verify_release(module, base, data)
        if params["packages"]:
            result["versions"] = check_packages(module, base, release)

    dest = params["key_dest"]
    if dest:
        before = b""
        if os.path.exists(dest):
            with open(dest, "rb") as handle:
                before = handle.read()
        if before != data:
            result["changed"] = True
            try:
                before_fp = ", ".join(primary_fingerprints(before)) if before else "(none)"
            except KeyFileError:
                before_fp = "(not a key)"
            result["diff"] = dict(before_header=dest, after_header=params["key_url"],
                                  before=before_fp + "\n", after=", ".join(found) + "\n")
            if not module.check_mode:
                directory = os.path.dirname(dest) or "."
                if not os.path.isdir(directory):
                    os.makedirs(directory, 0o755)
                handle, temp = tempfile.mkstemp(dir=directory)
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.chmod(temp, 0o644)
                module.atomic_move(temp, dest)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
