"""gpufleet.cloud.sshd_overrides on real configuration trees, with sshd -t
faked: which lines win over the hardened drop-in (read first, in a Match
block, an included file, a list keyword), what check mode and a report
change (nothing), what a normal run comments out, and that a result sshd
refuses puts every file back. The real sshd is the security scenario's
(extensions/molecule/security) and the lab's (tests/integration/test_drift.py)."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import sshd_overrides

HARDENED = {"passwordauthentication": "no", "permitrootlogin": "without-password", "allowgroups": "sshusers",
            "ciphers": "chacha20-poly1305@openssh.com"}
MANAGED = "sshd_config.d/10-hardening.conf"
DEBIAN = """# Debian's own, trimmed
Include /etc/ssh/sshd_config.d/*.conf
KbdInteractiveAuthentication no
UsePAM yes
X11Forwarding yes
Subsystem sftp /usr/lib/openssh/sftp-server
"""
DROPIN = """PasswordAuthentication no
PermitRootLogin prohibit-password
AllowGroups sshusers
Ciphers chacha20-poly1305@openssh.com
"""


@pytest.fixture
def etc(tmp_path):
    """An /etc/ssh with Debian's sshd_config (its Include pointed here) and the hardened drop-in."""
    (tmp_path / "sshd_config.d").mkdir()
    (tmp_path / "sshd_config").write_text(DEBIAN.replace("/etc/ssh/", str(tmp_path) + "/"))
    (tmp_path / MANAGED).write_text(DROPIN)
    return tmp_path


def found(etc):
    lines = sshd_overrides.read_config(str(etc / "sshd_config"))
    return [(os.path.relpath(o["path"], etc), o["line"], o["keyword"], o["match"])
            for o in sshd_overrides.find_overrides(lines, str(etc / MANAGED), HARDENED)]


def test_the_hardened_tree_has_no_override(etc):
    assert found(etc) == []


def test_later_lines_lose_and_are_left_alone(etc):
    # cloud-init's drop-in sorts after the hardening: sshd keeps the first value.
    (etc / "sshd_config.d/50-cloud-init.conf").write_text("PasswordAuthentication yes\nPermitRootLogin yes\n")
    (etc / "sshd_config").write_text((etc / "sshd_config").read_text() + "PasswordAuthentication yes\n")
    assert found(etc) == []


def test_a_drop_in_that_sorts_first_wins_and_is_found(etc):
    (etc / "sshd_config.d/00-local.conf").write_text("ClientAliveInterval 60\npasswordauthentication=yes\n")
    assert found(etc) == [("sshd_config.d/00-local.conf", 2, "passwordauthentication", None)]


def test_a_line_before_the_include_wins_and_the_same_value_first_is_harmless(etc):
    text = (etc / "sshd_config").read_text()
    (etc / "sshd_config").write_text("PermitRootLogin yes\nCiphers \"chacha20-poly1305@openssh.com\"\n" + text)
    # without-password and prohibit-password are one value; quotes do not count.
    assert found(etc) == [("sshd_config", 1, "permitrootlogin", None)]


def test_a_file_an_earlier_include_names_is_followed(etc):
    (etc / "extra").mkdir()
    (etc / "extra/b.conf").write_text("Ciphers aes128-cbc\n")
    (etc / "extra/a.conf").write_text("PermitRootLogin yes\n")
    # Relative to sshd_config's directory, globbed in sorted order.
    (etc / "sshd_config.d/00-local.conf").write_text("Include extra/*.conf\n")
    assert found(etc) == [("extra/a.conf", 1, "permitrootlogin", None), ("extra/b.conf", 1, "ciphers", None)]


def test_match_blocks_override_wherever_they_are_and_end_with_their_file(etc):
    (etc / "sshd_config").write_text((etc / "sshd_config").read_text()
                                     + "Match Address 10.9.0.0/16\n    PasswordAuthentication yes\n"
                                       "    PermitRootLogin prohibit-password\nMatch all\n  AllowGroups sshusers admins\n")
    # A Match block in a drop-in ends with that drop-in: the line after the
    # Include that reads it is global again, and loses to the hardening.
    (etc / "sshd_config.d/05-sftp.conf").write_text("Match Group sftp\n  PasswordAuthentication yes\n")
    (etc / "sshd_config.d/20-late.conf").write_text("PermitRootLogin yes\n")
    assert found(etc) == [
        ("sshd_config.d/05-sftp.conf", 2, "passwordauthentication", "Group sftp"),
        ("sshd_config", 8, "passwordauthentication", "Address 10.9.0.0/16"),
        ("sshd_config", 11, "allowgroups", "all"),
    ]


def test_an_include_inside_a_match_block_is_in_that_block(etc):
    (etc / "match.conf").write_text("PasswordAuthentication yes\n")
    (etc / "sshd_config").write_text((etc / "sshd_config").read_text() + "Match User backup\n  Include match.conf\n")
    assert found(etc) == [("match.conf", 1, "passwordauthentication", "User backup")]


def test_every_list_line_outside_the_drop_in_adds_to_the_list(etc):
    # sshd adds each AllowGroups line's groups, even after the hardening's.
    (etc / "sshd_config.d/90-more.conf").write_text("AllowGroups sshusers\n")
    assert found(etc) == [("sshd_config.d/90-more.conf", 1, "allowgroups", None)]


def test_an_include_loop_ends_at_sshds_depth(etc):
    (etc / "sshd_config.d/00-loop.conf").write_text(f"Include {etc}/sshd_config.d/00-loop.conf\nPermitRootLogin yes\n")
    assert found(etc)[0][:3] == ("sshd_config.d/00-loop.conf", 2, "permitrootlogin")


class FakeSshd:
    def __init__(self, monkeypatch, rc=0):
        self.calls = []

        def run_command(_module, cmd, *args, **kwargs):
            self.calls.append(cmd)
            return rc, "", "" if rc == 0 else "line 3: Bad configuration option: nonsense"

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda _m, name, *a, **k: "/usr/sbin/" + name)


def run(capsys, etc, check=False, disable=True):
    args = {"config": str(etc / "sshd_config"), "managed": str(etc / MANAGED), "settings": HARDENED,
            "disable": disable, "_ansible_check_mode": check, "_ansible_diff": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        sshd_overrides.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def overridden(etc):
    local = etc / "sshd_config.d/00-local.conf"
    local.write_text("ClientAliveCountMax 7\nPasswordAuthentication yes\n")
    config = etc / "sshd_config"
    config.write_text(config.read_text() + "Match Address 10.9.0.0/16\n  PermitRootLogin yes\n")
    return local, config


def test_check_mode_reports_each_line_with_a_diff_and_changes_nothing(etc, overridden, monkeypatch, capsys):
    local, config = overridden
    before = local.read_text(), config.read_text()
    sshd = FakeSshd(monkeypatch)
    result = run(capsys, etc, check=True)
    assert result["changed"] is True and result["disabled"] == []
    assert [(o["line"], o["text"]) for o in result["overrides"]] == [
        (2, "PasswordAuthentication yes"), (8, "PermitRootLogin yes")]
    assert f"{local}:2: PasswordAuthentication yes" in result["msg"]
    assert f"{config}:8: PermitRootLogin yes (in Match Address 10.9.0.0/16)" in result["msg"]
    diffs = {d["before_header"]: d for d in result["diff"]}
    assert sorted(diffs) == sorted([str(local), str(config)])
    assert sshd_overrides.MARKER + "PasswordAuthentication yes\n" in diffs[str(local)]["after"]
    assert (local.read_text(), config.read_text()) == before and sshd.calls == []


def test_a_report_changes_nothing_and_names_the_lines(etc, overridden, monkeypatch, capsys):
    local, config = overridden
    before = local.read_text(), config.read_text()
    FakeSshd(monkeypatch)
    result = run(capsys, etc, disable=False)
    assert result["changed"] is False and len(result["overrides"]) == 2 and "diff" not in result
    assert f"{local}:2: PasswordAuthentication yes" in result["msg"]
    assert (local.read_text(), config.read_text()) == before


def test_a_run_comments_out_only_those_lines_keeps_their_text_and_then_finds_none(etc, overridden, monkeypatch,
                                                                                  capsys):
    local, config = overridden
    os.chmod(local, 0o600)
    sshd = FakeSshd(monkeypatch)
    result = run(capsys, etc)
    assert result["changed"] is True
    assert result["disabled"] == [f"{local}:2", f"{config}:8"]
    assert local.read_text() == "ClientAliveCountMax 7\n" + sshd_overrides.MARKER + "PasswordAuthentication yes\n"
    assert config.read_text().endswith("Match Address 10.9.0.0/16\n" + sshd_overrides.MARKER + "PermitRootLogin yes\n")
    assert oct(os.stat(local).st_mode & 0o777) == "0o600"
    assert sshd.calls == [["/usr/sbin/sshd", "-t", "-f", str(config)]]
    assert not [p for p in os.listdir(local.parent) if p.startswith(".gpufleet-sshd-")]
    again = run(capsys, etc)
    assert again["changed"] is False and again["overrides"] == []


def test_a_result_sshd_refuses_puts_every_file_back(etc, overridden, monkeypatch, capsys):
    local, config = overridden
    before = local.read_text(), config.read_text()
    FakeSshd(monkeypatch, rc=255)
    result = run(capsys, etc)
    assert result["failed"] is True
    assert "every file is as it was" in result["msg"] and "Bad configuration option" in result["msg"]
    assert (local.read_text(), config.read_text()) == before


def test_an_unreadable_config_is_named(tmp_path, monkeypatch, capsys):
    FakeSshd(monkeypatch)
    args = {"config": str(tmp_path / "missing"), "managed": str(tmp_path / "x.conf"), "settings": HARDENED}
    with patch_module_args(args), pytest.raises(SystemExit):
        sshd_overrides.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] and result["msg"].startswith(f"config: {tmp_path / 'missing'} cannot be read")
