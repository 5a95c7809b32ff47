"""gpufleet-storage's logic with a fake runner and a fake KMS: which
commands run, in what order, and that the key travels only on stdin or in
a memfd, never in an argument."""

from __future__ import annotations

import os
import subprocess

import pytest

from ...conftest import load_helper

storage = load_helper("encrypted_storage", "gpufleet_storage.py", "gpufleet_storage")
KEY = bytes(range(32))


class Runner:
    """Answers commands from a table keyed by the command's first words."""

    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or {}

    def __call__(self, argv, stdin=None, pass_fds=()):
        fd_content = {fd: os.pread(fd, 64, 0) for fd in pass_fds}
        self.calls.append({"argv": list(argv), "stdin": stdin, "fds": fd_content})
        for prefix, (rc, out) in self.answers.items():
            if " ".join(argv).startswith(prefix):
                return subprocess.CompletedProcess(argv, rc, out.encode(), b"" if rc == 0 else out.encode())
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    def ran(self, prefix):
        return [c for c in self.calls if " ".join(c["argv"]).startswith(prefix)]


def volume(tmp_path, backend="luks", runner=None, kms=None, dm=False):
    device = tmp_path / "disk"
    device.write_bytes(b"")
    misc = tmp_path / "misc"
    misc.write_text(" 237 loop-control\n" + (" 236 device-mapper\n" if dm else ""))
    cfg = {"name": "data", "backend": backend, "device": str(device), "loop_file": "", "mount_point": str(tmp_path / "mnt"),
           "fscrypt_dir": str(tmp_path / "mnt" / "encrypted"), "envelope": "/etc/gpufleet/kms/storage-data.envelope",
           "luks_pbkdf": "pbkdf2", "retries": 1, "retry_delay": 0}
    logs = []
    vol = storage.Volume(cfg, run=runner or Runner(), kms=kms or (lambda *a: KEY), log=logs.append, proc_misc=str(misc))
    vol.logs = logs
    return vol


def assert_key_never_in_argv(runner):
    for call in runner.calls:
        joined = " ".join(call["argv"]).encode()
        assert KEY not in joined and KEY.hex().encode() not in joined


def test_blank_device_is_formatted_with_the_key_on_stdin(tmp_path):
    runner = Runner({"blkid": (2, "")})
    vol = volume(tmp_path, runner=runner)
    assert vol.prepare() == ["luksFormat %s" % vol.cfg["device"]]
    fmt = runner.ran("cryptsetup luksFormat")[0]
    assert fmt["stdin"] == KEY and "--key-file=-" in fmt["argv"]
    assert fmt["argv"][fmt["argv"].index("--pbkdf-force-iterations") + 1] == "1000"
    assert runner.ran("cryptsetup open --test-passphrase")[0]["stdin"] == KEY
    assert_key_never_in_argv(runner)


def test_a_device_with_data_is_never_formatted(tmp_path):
    runner = Runner({"blkid": (0, "xfs\n")})
    with pytest.raises(storage.StorageError, match="holds a xfs signature; refusing"):
        volume(tmp_path, runner=runner).prepare()
    assert not runner.ran("cryptsetup")


def test_an_existing_volume_is_only_verified(tmp_path):
    runner = Runner({"blkid": (0, "crypto_LUKS\n")})
    assert volume(tmp_path, runner=runner).prepare() == []
    assert not runner.ran("cryptsetup luksFormat")
    assert runner.ran("cryptsetup open --test-passphrase")


def test_unlock_without_device_mapper_fails_clearly_after_checking_the_key(tmp_path):
    runner = Runner({"blkid": (0, "crypto_LUKS\n")})
    vol = volume(tmp_path, runner=runner, dm=False)
    with pytest.raises(storage.StorageError, match="no device-mapper"):
        vol.unlock()
    assert runner.ran("cryptsetup open --test-passphrase")
    assert not runner.ran("cryptsetup open --type")
    assert any("opens a LUKS2 keyslot" in line for line in vol.logs)


def test_unlock_with_device_mapper_opens_then_mounts(tmp_path):
    runner = Runner({"blkid --probe --output value --match-tag TYPE /dev/mapper": (0, "ext4\n")})
    vol = volume(tmp_path, runner=runner, dm=True)
    vol.unlock()
    opened = runner.ran("cryptsetup open --type luks2")[0]
    assert opened["stdin"] == KEY and opened["argv"][-2:] == [vol.cfg["device"], "data"]
    assert runner.ran("mount")[0]["argv"][-2:] == ["/dev/mapper/data", vol.cfg["mount_point"]]
    assert_key_never_in_argv(runner)


def test_a_wrong_key_keeps_the_volume_locked(tmp_path):
    runner = Runner({"cryptsetup open --test-passphrase": (2, "No key available with this passphrase.")})
    with pytest.raises(storage.StorageError, match="opens no keyslot"):
        volume(tmp_path, runner=runner, dm=True).unlock()
    assert not runner.ran("cryptsetup open --type") and not runner.ran("mount")


def test_an_unreachable_kms_keeps_the_volume_locked(tmp_path):
    def kms(*args):
        raise storage.KmsError("unreachable", "AWS KMS is unreachable (http://10.0.2.2:1)")

    runner = Runner()
    with pytest.raises(storage.StorageError, match="stays locked: AWS KMS is unreachable"):
        volume(tmp_path, runner=runner, kms=kms, dm=True).unlock()
    assert not runner.ran("cryptsetup open") and not runner.ran("mount")


def test_fscrypt_gets_the_key_from_a_memfd(tmp_path):
    runner = Runner({"blkid": (0, "ext4\n"), "dumpe2fs": (0, "Filesystem features: has_journal encrypt\n"),
                     "fscrypt status": (0, "Unlocked: No\n")})
    vol = volume(tmp_path, backend="fscrypt", runner=runner)
    os.makedirs(vol.cfg["mount_point"])
    vol.mounted = lambda path=None: True
    vol.unlock()
    unlock = runner.ran("fscrypt unlock")[0]
    (fd, content), = unlock["fds"].items()
    assert content == KEY and unlock["argv"][-1] == "--key=/dev/fd/%d" % fd
    assert_key_never_in_argv(runner)


def test_fscrypt_wrong_key_is_reported(tmp_path):
    runner = Runner({"blkid": (0, "ext4\n"), "dumpe2fs": (0, "Filesystem features: encrypt\n"),
                     "fscrypt status": (0, "Unlocked: No\n"), "fscrypt unlock": (1, "incorrect key provided")})
    vol = volume(tmp_path, backend="fscrypt", runner=runner)
    vol.mounted = lambda path=None: True
    with pytest.raises(storage.StorageError, match="does not unlock .* stays locked"):
        vol.unlock()


def test_fscrypt_prepare_makes_an_encrypted_filesystem_on_a_blank_device(tmp_path, monkeypatch):
    runner = Runner({"blkid": (2, ""), "dumpe2fs": (0, "Filesystem features: has_journal encrypt\n"),
                     "fscrypt status": (1, '[ERROR] fscrypt status: file or directory "/d" is not\nencrypted')})
    vol = volume(tmp_path, backend="fscrypt", runner=runner)
    monkeypatch.setattr(storage.os.path, "exists", lambda p: p != "/etc/fscrypt.conf" and os.access(p, os.F_OK))
    actions = vol.prepare()
    assert runner.ran("mkfs.ext4 -q -O encrypt")
    assert "fscrypt encrypt %s" % vol.cfg["fscrypt_dir"] in actions
    assert runner.ran("fscrypt encrypt")[0]["fds"]


def test_main_reports_failures_on_stderr(tmp_path, capsys):
    def factory(name):
        raise storage.StorageError("cannot read /etc/gpufleet/storage/%s.json" % name)

    assert storage.main(["unlock", "data"], volume_factory=factory) == 1
    assert "unlock failed" in capsys.readouterr().err


def test_a_tool_that_hangs_fails_with_a_message_instead(monkeypatch):
    monkeypatch.setattr(storage, "TOOL_TIMEOUT", 0.5)
    result = storage.default_run(["sleep", "30"])
    assert result.returncode == 124 and b"sleep did not finish within" in result.stderr
