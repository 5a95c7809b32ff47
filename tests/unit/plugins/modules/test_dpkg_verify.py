"""gpufleet.cloud.dpkg_verify's decisions, with dpkg and apt-get faked by
what they print on Debian (the `dpkg --verify` lines are real output from
a Debian 12 node with files changed and removed by hand)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import dpkg_verify

LIB = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.247.01"
# Written over by NVIDIA's .run installer, one file removed, one conffile
# changed (the role's own tasks write conffiles).
TAMPERED = {
    "libnvidia-ml1": f"??5??????   {LIB}\nmissing     /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n",
    "prometheus-node-exporter": "??5?????? c /etc/default/prometheus-node-exporter\n",
}


class FakeNode:
    def __init__(self, monkeypatch, verify, *, installed=("libnvidia-ml1", "prometheus-node-exporter"),
                 reinstall_rc=0, repairs=True):
        self.verify = dict(verify)
        self.calls = []

        def run_command(_module, argv, *args, **kwargs):
            self.calls.append(argv)
            if argv[0] == "dpkg-query":
                rows = [f"{n}\t1.0-1\tinstalled" for n in argv[4:] if n in installed]
                return (0 if len(rows) == len(argv) - 4 else 1), "\n".join(rows) + "\n", ""
            if argv[:2] == ["dpkg", "--verify"]:
                return 0, self.verify.get(argv[2], ""), ""
            if argv[:3] == ["apt-get", "install", "--reinstall"]:
                if reinstall_rc:
                    return reinstall_rc, "", "E: Unable to fetch some archives"
                if repairs:
                    for target in argv:
                        name = target.split("=", 1)[0]
                        # A reinstall keeps a changed conffile (--force-confold).
                        self.verify[name] = "".join(
                            line + "\n" for line in self.verify.get(name, "").splitlines() if line[10] == "c")
                return 0, "", ""
            raise AssertionError(argv)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)

    def reinstalls(self):
        return [c for c in self.calls if c[:3] == ["apt-get", "install", "--reinstall"]]


def run(capsys, check=False, **params):
    args = {"packages": ["libnvidia-ml1", "prometheus-node-exporter"], "_ansible_check_mode": check,
            "_ansible_diff": True, **params}
    with patch_module_args(args), pytest.raises(SystemExit):
        dpkg_verify.main()
    return json.loads(capsys.readouterr().out)


def test_intact_packages_change_nothing(monkeypatch, capsys):
    node = FakeNode(monkeypatch, {})
    result = run(capsys)
    assert result["changed"] is False and result["files"] == [] and node.reinstalls() == []


def test_check_mode_lists_the_files_and_marks_conffiles(monkeypatch, capsys):
    node = FakeNode(monkeypatch, TAMPERED)
    result = run(capsys, check=True)
    assert result["changed"] is True and node.reinstalls() == []
    by_path = {f["path"]: f for f in result["files"]}
    assert by_path[LIB]["problem"] == "checksum differs" and by_path[LIB]["counts"] is True
    assert by_path["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]["problem"] == "missing"
    conf = by_path["/etc/default/prometheus-node-exporter"]
    assert conf["conffile"] is True and conf["counts"] is False
    assert f"libnvidia-ml1: {LIB} (checksum differs)" in result["diff"]["before"]
    assert "conffile" in result["diff"]["after"] and LIB not in result["diff"]["after"]


def test_only_a_changed_conffile_is_not_drift_unless_asked(monkeypatch, capsys):
    FakeNode(monkeypatch, {"prometheus-node-exporter": TAMPERED["prometheus-node-exporter"]})
    assert run(capsys, check=True)["changed"] is False
    assert run(capsys, check=True, conffiles=True)["changed"] is True


def test_a_run_reinstalls_exactly_the_installed_version_of_the_affected_package(monkeypatch, capsys):
    node = FakeNode(monkeypatch, TAMPERED)
    result = run(capsys)
    assert result["changed"] is True and result["reinstalled"] == ["libnvidia-ml1=1.0-1"]
    (argv,) = node.reinstalls()
    assert argv[-1] == "libnvidia-ml1=1.0-1" and "prometheus-node-exporter=1.0-1" not in argv


def test_a_failed_reinstall_fails_and_says_why(monkeypatch, capsys):
    FakeNode(monkeypatch, TAMPERED, reinstall_rc=100)
    result = run(capsys)
    assert result["failed"] is True and "Unable to fetch" in result["msg"]


def test_files_that_still_differ_after_the_reinstall_fail(monkeypatch, capsys):
    FakeNode(monkeypatch, TAMPERED, repairs=False)
    result = run(capsys)
    assert result["failed"] is True and "still differ" in result["msg"] and LIB in result["msg"]


def test_a_package_that_is_not_installed_is_left_to_the_install_task(monkeypatch, capsys):
    node = FakeNode(monkeypatch, TAMPERED, installed=("prometheus-node-exporter",))
    result = run(capsys, check=True)
    assert result["not_installed"] == ["libnvidia-ml1"] and result["changed"] is False
    assert ["dpkg", "--verify", "libnvidia-ml1"] not in node.calls


def test_no_package_names_is_an_error(monkeypatch, capsys):
    FakeNode(monkeypatch, {})
    result = run(capsys, packages=[])
    assert result["failed"] is True and "packages" in result["msg"]


def test_files_dpkg_was_told_not_to_install_are_not_missing(monkeypatch, capsys, tmp_path):
    # Minimal cloud images keep documentation off the disk; dpkg --verify
    # still lists those files as missing.
    (tmp_path / "dpkg.cfg.d").mkdir()
    (tmp_path / "dpkg.cfg.d" / "excludes").write_text(
        "# minimal image\npath-exclude=/usr/share/doc/*\npath-include=/usr/share/doc/*/copyright\n")
    (tmp_path / "dpkg.cfg").write_text("no-debsig\n")
    monkeypatch.setattr(dpkg_verify, "DPKG_CFG_DIR", str(tmp_path))
    FakeNode(monkeypatch, {"libnvidia-ml1": "missing     /usr/share/doc/libnvidia-ml1\n"
                                            "missing     /usr/share/doc/libnvidia-ml1/changelog.gz\n"
                                            "missing     /usr/share/doc/libnvidia-ml1/copyright\n"})
    result = run(capsys, check=True)
    assert [f["path"] for f in result["files"]] == ["/usr/share/doc/libnvidia-ml1/copyright"]
    assert result["changed"] is True, "a file the filters re-include is still missing"
