"""dpkg's list of installed packages, as the collection's actions read it
(plugins/plugin_utils/_dpkg.py): package_facts' form for node_facts, and
what is left for apt to do for apt_install."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _dpkg

NATIVE = "amd64\n"


def row(name, version="1.0-1", arch="amd64", status="ii "):
    return "\t".join((name, version, arch, status)) + "\n"


def test_dpkg_lists_what_has_a_version_on_the_node():
    listed = _dpkg.dpkg_packages(NATIVE + row("jq") + row("libjq1", status="hi ") + row("half", status="iU ")
                                 + row("gone", status="rc ") + row("never", status="un ")
                                 + row("nvidia-kernel-dkms", "535.309.01-1~deb12u1"))
    assert sorted(listed) == ["half", "jq", "libjq1", "nvidia-kernel-dkms"]
    assert listed["nvidia-kernel-dkms"] == [{"name": "nvidia-kernel-dkms", "version": "535.309.01-1~deb12u1",
                                             "arch": "amd64", "source": "dpkg"}]


def test_dpkg_names_another_architecture_as_apt_does_and_keeps_each_install():
    listed = _dpkg.dpkg_packages(NATIVE + row("libc6", "2.36-9", "amd64") + row("libc6", "2.36-9", "i386")
                                 + row("tzdata", "2024a-0", "all") + row("dcgm", "1:4.4.1-1", "amd64"))
    assert listed["libc6"][0]["arch"] == "amd64" and listed["libc6:i386"][0]["name"] == "libc6:i386"
    assert listed["tzdata"][0]["arch"] == "all"
    # The epoch stays in the version, as package_facts gives it.
    assert listed["dcgm"][0]["version"] == "1:4.4.1-1"


@pytest.mark.parametrize("stdout", ["", "\n" + row("jq"), NATIVE + "jq\t1.0-1\tamd64\n", NATIVE + "jq\t1.0-1\tamd64\tii \tutils\n"])
def test_dpkg_output_it_cannot_read_is_an_error_never_no_packages(stdout):
    with pytest.raises(ValueError):
        _dpkg.dpkg_packages(stdout)


# The node's packages for the apt_install cases.
LISTED = (NATIVE + row("jq", "1.7.1-3") + row("libjq1", "1.7.1-3", status="hi ") + row("half", status="iU ")
          + row("gone", status="rc ") + row("broken", status="iiR") + row("libc6", "2.36-9", "i386")
          + row("tzdata", "2024a-0", "all") + row("dcgm", "1:4.4.1-1"))


@pytest.mark.parametrize("specs", [[], ["jq"], ["jq", "libjq1", "tzdata"], ["jq=1.7.1-3"], ["dcgm=1:4.4.1-1"],
                                   ["libc6:i386"], ["libc6:i386=2.36-9"]])
def test_everything_installed_leaves_apt_nothing(specs):
    # A held package is installed; a package of all architectures is named
    # without one; an epoch is part of the version.
    assert _dpkg.needs_apt(specs, LISTED) == []


@pytest.mark.parametrize("spec", [
    "missing",            # dpkg does not know it
    "gone",               # only its configuration files are left
    "half",               # unpacked, never configured
    "broken",             # installed, but dpkg wants it reinstalled
    "jq=1.7.1-4",         # another version installed
    "dcgm=4.4.1-1",       # the version without its epoch is another version
    "libc6",              # only another architecture's is installed
    "jq=1.7*",            # a version pattern: apt may move to a newer match
    "j?",                 # a name pattern: apt expands it
    "lib[j]q1",
    "jq>=1.0",            # only apt compares versions
])
def test_what_dpkg_cannot_vouch_for_is_left_to_apt(spec):
    assert _dpkg.needs_apt(["jq", spec], LISTED) == [spec]


def test_a_list_dpkg_did_not_give_is_an_error_never_installed():
    with pytest.raises(ValueError):
        _dpkg.needs_apt(["jq"], "")


POLICY = """nvidia-open-580:
  Installed: 580.95.05-1
  Candidate: 580.95.05-1
  Version table:
 *** 580.95.05-1 1001
        500 http://127.0.0.1:8089/cuda/debian12/x86_64  Packages
        100 /var/lib/dpkg/status
     580.82.07-1 500
        500 http://127.0.0.1:8089/cuda/debian12/x86_64  Packages
     570.195.03-1 500
        500 http://127.0.0.1:8089/cuda/debian12/x86_64  Packages
libnccl2:
  Installed: 2.26.2-1+cuda12.8
  Candidate: 2.27.7-1+cuda13.0
  Version table:
     2.27.7-1+cuda13.0 500
        500 http://127.0.0.1:8089/cuda/debian12/x86_64  Packages
 *** 2.26.2-1+cuda12.8 500
        500 http://127.0.0.1:8089/cuda/debian12/x86_64  Packages
        100 /var/lib/dpkg/status
     2.26.2-2+cuda12.8 100
        100 http://127.0.0.1:8089/old/debian12/x86_64  Packages
"""
AUTO = """Package: libjq1
Architecture: amd64
Auto-Installed: 1

Package: jq
Architecture: amd64
Auto-Installed: 0

Package: libc6
Architecture: i386
Auto-Installed: 1
"""
PATTERNED = (NATIVE + row("jq", "1.7.1-3") + row("libjq1", "1.7.1-3") + row("libc6", "2.36-9", "i386")
             + row("nvidia-open-580", "580.95.05-1", status="hi ") + row("libnccl2", "2.26.2-1+cuda12.8", status="hi ")
             + _dpkg.AUTO_MARK + "\n" + AUTO + _dpkg.POLICY_MARK + "\n" + POLICY)


@pytest.mark.parametrize("spec, left", [
    ("nvidia-open-580=580.95.05*", False),  # the only version the pattern matches is installed
    ("nvidia-open-580=580.*", True),        # 580.82.07-1 matches too: apt takes the newest match
    ("nvidia-open-580=570.*", True),        # the installed one does not match
    ("libnccl2=2.26.2-1+cuda12.8*", False),  # the installed build is the only match
    ("libnccl2=2.26.2*", True),             # another revision matches, from a lower-priority source
    ("libnccl2=2.27.7*", True),
    ("jq", False),                          # marked as installed by hand
    ("libjq1", True),                       # installed as a dependency: apt marks it as installed by hand
    ("libc6:i386", True),                   # the mark is the architecture's
])
def test_version_patterns_and_apt_s_marks(spec, left):
    assert _dpkg.needs_apt([spec], PATTERNED) == ([spec] if left else [])


def test_the_versions_apt_knows_are_read_from_its_version_table():
    known = _dpkg.policy_versions(POLICY)
    assert known == {"nvidia-open-580": ["580.95.05-1", "580.82.07-1", "570.195.03-1"],
                     "libnccl2": ["2.27.7-1+cuda13.0", "2.26.2-1+cuda12.8", "2.26.2-2+cuda12.8"]}


def test_the_read_asks_apt_cache_only_for_version_patterns():
    script = _dpkg.install_read(["jq", "jq=1.7.1-3", "libnccl2=2.26*", "j?"])
    assert _dpkg.DPKG_QUERY in script and "/var/lib/apt/extended_states" in script
    assert script.endswith("apt-cache policy -- libnccl2")
    assert "apt-cache" not in _dpkg.install_read(["jq", "jq=1.7.1-3"])
