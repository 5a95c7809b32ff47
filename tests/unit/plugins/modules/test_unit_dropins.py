"""gpufleet.cloud.unit_dropins' decisions on real drop-in files, with
systemd faked: which drop-ins override the unit's own settings, what check
mode reports, and what a normal run moves aside, reloads and restarts. The
real systemd is the lab's (tests/integration/test_drift.py's drop-in rows)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import unit_dropins

TIMER = """[Unit]
Description=gpufleet backup

[Timer]
OnCalendar=*:0/10
RandomizedDelaySec=60
Persistent=true

[Install]
WantedBy=timers.target
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """/etc and /run under tmp_path, counted as local drop-in places, and
    the unit's file."""
    etc, run, lib = tmp_path / "etc/systemd/system", tmp_path / "run/systemd/system", tmp_path / "usr/lib/systemd"
    for d in (etc, run, lib):
        d.mkdir(parents=True)
    monkeypatch.setattr(unit_dropins, "_LOCAL", (str(tmp_path / "etc/systemd") + "/", str(tmp_path / "run/systemd") + "/"))
    monkeypatch.setattr(unit_dropins, "_VENDOR", (str(lib),))
    (etc / "gpufleet-backup.timer").write_text(TIMER)
    return etc, run, lib


def dropin(directory, unit, name, text):
    d = directory / (unit + ".d")
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return str(d / name)


class FakeSystemd:
    def __init__(self, monkeypatch, fragment, dropins, active="active", load="loaded", running=None):
        self.calls = []
        self.asked = []

        def run_command(_module, cmd, *args, **kwargs):
            self.calls.append(cmd[1])
            if cmd[1] == "show" and "LoadState" in cmd:
                return 0, "LoadState=%s\nActiveState=%s\nFragmentPath=%s\nDropInPaths=%s\n" % (
                    load, active, fragment, " ".join(dropins)), ""
            if cmd[1] == "show":
                # The properties a running unit shows; None: systemctl fails.
                self.asked.append([a for a in cmd[3:] if a != "-p"])
                if running is None:
                    return 1, "", "Failed to connect to bus"
                return 0, "".join("%s=%s\n" % (p, running[p]) for p in cmd[3:] if p in running), ""
            if cmd[1] in ("daemon-reload", "restart"):
                return 0, "", ""
            raise AssertionError(cmd)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda _m, name, *a, **k: "/usr/bin/" + name)


def run(capsys, check=False, name="gpufleet-backup.timer", allowed=(), **options):
    args = {"name": name, "allowed": list(allowed), "_ansible_check_mode": check, "_ansible_diff": True, **options}
    with patch_module_args(args), pytest.raises(SystemExit):
        unit_dropins.main()
    return json.loads(capsys.readouterr().out)


def test_parse_keys_reads_sections_resets_comments_and_continuations():
    assert unit_dropins.parse_keys(
        "# c\n[Service]\nExecStart=\nExecStart=/bin/a \\\n  --flag=x\n; c\nEnvironment=A=1\n[Unit]\nAfter=x\n"
    ) == {"Service.ExecStart", "Service.Environment", "Unit.After"}


def test_a_drop_in_that_changes_the_schedule_is_reported_in_check_mode(tree, monkeypatch, capsys):
    etc, run_dir, lib = tree
    weekly = dropin(etc, "gpufleet-backup.timer", "weekly.conf", "[Timer]\nOnCalendar=\nOnCalendar=weekly\n")
    # Another key only (kept), a package's own drop-in (never local), and a
    # runtime override (reported too).
    extra = dropin(etc, "gpufleet-backup.timer", "accuracy.conf", "[Timer]\nAccuracySec=1s\n")
    vendor = dropin(lib, "gpufleet-backup.timer", "vendor.conf", "[Timer]\nOnCalendar=daily\n")
    runtime = dropin(run_dir, "gpufleet-backup.timer", "now.conf", "[Timer]\nPersistent=false\n")
    running = {"TimersCalendar": "{ OnCalendar=weekly ; next_elapse=Mon 2026-12-07 00:00:00 UTC }",
               "Persistent": "no"}
    fake = FakeSystemd(monkeypatch, etc / "gpufleet-backup.timer", [weekly, extra, vendor, runtime], running=running)
    out = run(capsys, check=True)
    assert out["changed"] is True
    assert out["overrides"] == [{"path": weekly, "keys": ["Timer.OnCalendar"]},
                                {"path": runtime, "keys": ["Timer.Persistent"]}]
    assert out["kept"] == [extra]
    # What systemd runs, from systemctl show, against the unit's own file;
    # then each file that does it.
    assert out["running"] == running
    assert out["diff"][0] == {
        "before_header": "gpufleet-backup.timer as systemd runs it (systemctl show)",
        "before": "TimersMonotonic=(none)\nTimersCalendar=%s\nPersistent=no\n" % running["TimersCalendar"],
        "after_header": "gpufleet-backup.timer as its own file sets it",
        "after": "Timer.OnCalendar=*:0/10\nTimer.Persistent=true\n"}
    assert out["diff"][1] == {"before_header": weekly, "before": "[Timer]\nOnCalendar=\nOnCalendar=weekly\n",
                              "after_header": weekly + ".gpufleet-disabled", "after": ""}
    assert "weekly.conf overrides Timer.OnCalendar" in out["msg"]
    assert fake.calls == ["show", "show"]
    assert fake.asked == [["TimersMonotonic", "TimersCalendar", "Persistent"]]
    assert (etc / "gpufleet-backup.timer.d" / "weekly.conf").exists()


def test_a_normal_run_moves_each_override_aside_reloads_and_restarts(tree, monkeypatch, capsys):
    etc, run_dir, _lib = tree
    weekly = dropin(etc, "gpufleet-backup.timer", "weekly.conf", "[Timer]\nOnCalendar=weekly\n")
    # One moved aside by an earlier run stays where it is.
    (etc / "gpufleet-backup.timer.d" / "weekly.conf.gpufleet-disabled").write_text("old\n")
    fake = FakeSystemd(monkeypatch, etc / "gpufleet-backup.timer", [weekly])
    out = run(capsys)
    assert out["changed"] is True and out["restarted"] is True
    assert out["moved"] == [weekly + ".gpufleet-disabled.2"]
    assert not (etc / "gpufleet-backup.timer.d" / "weekly.conf").exists()
    assert (etc / "gpufleet-backup.timer.d" / "weekly.conf.gpufleet-disabled").read_text() == "old\n"
    assert fake.calls == ["show", "show", "daemon-reload", "restart"]


def test_allowed_drop_ins_stay_and_their_keys_count_as_the_units(tree, monkeypatch, capsys):
    etc, _run, _lib = tree
    (etc / "chrony.service").write_text("[Service]\nExecStart=/usr/sbin/chronyd\n")
    own = dropin(etc, "chrony.service", "90-gpufleet-container.conf", "[Service]\nExecStart=\nExecStart=/usr/sbin/chronyd -x\n"
                 "Environment=A=1\n")
    other = dropin(etc, "chrony.service", "50-local.conf", "[Service]\nEnvironment=A=2\n")
    FakeSystemd(monkeypatch, etc / "chrony.service", [other, own], active="inactive", running={"Environment": "A=2"})
    out = run(capsys, name="chrony.service", allowed=[own])
    assert out["overrides"] == [{"path": other, "keys": ["Service.Environment"]}]
    # The wanted value is the allowed drop-in's, which the unit's file lacks.
    assert out["diff"][0]["before"] == "Environment=A=2\n" and out["diff"][0]["after"] == "Service.Environment=A=1\n"
    assert out["restarted"] is False and out["moved"] == [other + ".gpufleet-disabled"]
    assert (etc / "chrony.service.d" / "90-gpufleet-container.conf").exists()


def test_an_override_shared_with_other_units_is_named_not_moved(tree, monkeypatch, capsys):
    etc, _run, _lib = tree
    shared = dropin(etc, "timer", "all.conf", "[Timer]\nPersistent=false\n")
    FakeSystemd(monkeypatch, etc / "gpufleet-backup.timer", [shared])
    out = run(capsys)
    assert out["failed"] is True and out["moved"] == []
    assert f"{shared} also apply to other units, so they are not moved" in out["msg"]
    assert (etc / "timer.d" / "all.conf").exists()


def test_nothing_to_do_for_a_clean_or_missing_unit(tree, monkeypatch, capsys):
    etc, _run, _lib = tree
    FakeSystemd(monkeypatch, etc / "gpufleet-backup.timer", [])
    assert run(capsys)["changed"] is False
    FakeSystemd(monkeypatch, "", [], load="not-found", active="inactive")
    out = run(capsys, check=True)
    assert out["changed"] is False and "not loaded (not-found)" in out["msg"]


SSH = """[Service]
EnvironmentFile=-/etc/default/ssh
ExecStartPre=/usr/sbin/sshd -t
ExecStart=/usr/sbin/sshd -D $SSHD_OPTS
"""


def test_with_keys_only_those_count_even_where_the_units_file_does_not_set_them(tree, monkeypatch, capsys):
    etc, _run, _lib = tree
    (etc / "ssh.service").write_text(SSH)
    # An image's host-key step changes ExecStartPre, which the unit's file
    # sets, and stays; sshd options through Environment, which the file does
    # not set, and a new ExecStart are overrides.
    hostkeys = dropin(etc, "ssh.service", "hostkeys.conf", "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\n")
    opts = dropin(etc, "ssh.service", "opts.conf", "[Service]\nEnvironment=SSHD_OPTS=-oPasswordAuthentication=yes\n")
    cmd = dropin(etc, "ssh.service", "zz.conf", "[Service]\nExecStart=\nExecStart=/usr/sbin/sshd -D -f /etc/other\n")
    keys = ["Service.ExecStart", "Service.Environment", "Service.EnvironmentFile"]
    FakeSystemd(monkeypatch, etc / "ssh.service", [hostkeys, opts, cmd])
    out = run(capsys, check=True, name="ssh.service", keys=keys)
    assert out["overrides"] == [{"path": opts, "keys": ["Service.Environment"]},
                                {"path": cmd, "keys": ["Service.ExecStart"]}]
    assert out["kept"] == [hostkeys]
    # Without keys the host-key step would be an override and Environment not.
    FakeSystemd(monkeypatch, etc / "ssh.service", [hostkeys, opts, cmd])
    out = run(capsys, check=True, name="ssh.service")
    assert [o["path"] for o in out["overrides"]] == [hostkeys, cmd] and out["kept"] == [opts]


def test_restart_false_moves_and_reloads_but_leaves_the_running_unit_alone(tree, monkeypatch, capsys):
    etc, _run, _lib = tree
    (etc / "nftables.service").write_text("[Service]\nExecStart=/usr/sbin/nft -f /etc/nftables.conf\n")
    other = dropin(etc, "nftables.service", "50-local.conf", "[Service]\nExecStart=\nExecStart=/usr/sbin/nft -f /etc/x\n")
    fake = FakeSystemd(monkeypatch, etc / "nftables.service", [other])
    out = run(capsys, name="nftables.service", restart=False)
    assert out["changed"] is True and out["restarted"] is False
    assert out["moved"] == [other + ".gpufleet-disabled"]
    assert fake.calls == ["show", "show", "daemon-reload"]
    assert "not restarted (restart=false): it runs without them from its next start" in out["msg"]


def test_a_whole_file_in_place_of_the_packages_is_an_override_and_gives_way_to_it(tree, monkeypatch, capsys):
    etc, _run, lib = tree
    (lib / "ssh.service").write_text(SSH)
    # systemctl edit --full: the package's file with one line changed.
    (etc / "ssh.service").write_text(SSH.replace("sshd -D $SSHD_OPTS", "sshd -D -oPermitRootLogin=yes"))
    keys = ["Service.ExecStart", "Service.Environment", "Service.EnvironmentFile"]
    FakeSystemd(monkeypatch, etc / "ssh.service", [])
    out = run(capsys, check=True, name="ssh.service", keys=keys)
    assert out["overrides"] == [{"path": str(etc / "ssh.service"), "keys": ["Service.ExecStart"]}]
    assert out["diff"][1]["after_header"] == str(lib / "ssh.service") and out["diff"][1]["after"] == SSH
    # systemctl show failed: the running side says so, the wanted side is
    # the package's file, and the files still show the override.
    assert out["running"] is None
    assert out["diff"][0]["before"] == "" and "systemctl show failed" in out["diff"][0]["before_header"]
    assert out["diff"][0]["after"] == "Service.ExecStart=/usr/sbin/sshd -D $SSHD_OPTS\n"
    fake = FakeSystemd(monkeypatch, etc / "ssh.service", [])
    out = run(capsys, name="ssh.service", keys=keys)
    assert out["moved"] == [str(etc / "ssh.service") + ".gpufleet-disabled"] and out["restarted"] is True
    assert not (etc / "ssh.service").exists() and fake.calls == ["show", "show", "daemon-reload", "restart"]


def test_a_whole_file_that_differs_only_where_nothing_counts_or_is_the_packages_is_no_change(tree, monkeypatch, capsys):
    etc, _run, lib = tree
    (lib / "ssh.service").write_text(SSH)
    (etc / "ssh.service").write_text(SSH.replace("ExecStartPre=/usr/sbin/sshd -t", "ExecStartPre=/usr/bin/ssh-keygen -A"))
    FakeSystemd(monkeypatch, etc / "ssh.service", [])
    assert run(capsys, check=True, name="ssh.service", keys=["Service.ExecStart"])["changed"] is False
    # Without keys that difference counts.
    FakeSystemd(monkeypatch, etc / "ssh.service", [])
    assert run(capsys, check=True, name="ssh.service")["overrides"][0]["keys"] == ["Service.ExecStartPre"]
    # The package's file itself, loaded from where the package put it.
    FakeSystemd(monkeypatch, lib / "ssh.service", [])
    assert run(capsys, check=True, name="ssh.service")["changed"] is False


def test_a_replaced_template_serves_every_instance_and_is_named_not_moved(tree, monkeypatch, capsys):
    etc, _run, lib = tree
    (lib / "unlock@.service").write_text("[Service]\nExecStop=/sbin/lock %i\n")
    (etc / "unlock@.service").write_text("[Service]\nExecStop=/bin/true\n")
    FakeSystemd(monkeypatch, etc / "unlock@.service", [])
    out = run(capsys, name="unlock@vault.service")
    assert out["failed"] is True and out["moved"] == []
    assert f"{etc / 'unlock@.service'} also apply to other units, so they are not moved" in out["msg"]


def test_continued_lines_are_one_value():
    assert unit_dropins.parse_settings("[Service]\nExecStart=/bin/a \\\n  --flag=x\nExecStart=/bin/b\n") == {
        "Service.ExecStart": ["/bin/a --flag=x", "/bin/b"]}
