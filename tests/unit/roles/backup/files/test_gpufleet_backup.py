"""gpufleet-backup's logic with a fake restic: hooks, metrics, retention."""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from ...conftest import load_helper

backup = load_helper("backup", "gpufleet_backup.py", "gpufleet_backup")


# What restic says when `cat config` finds no repository (0.18: exit 10;
# Debian 12's 0.14: exit 1, the same hint), as run on both releases.
MISSING = ("Fatal: repository does not exist: unable to open config file: stat /r/config: no such file or directory\n"
           "Is there a repository at the following location?\n/r")


class Restic:
    def __init__(self, fail=(), snapshots=3, listing=None, rc=1, stderr="boom"):
        self.calls = []
        self.fail = fail
        self.rc, self.stderr = rc, stderr
        self.snapshots = snapshots
        self.listing = listing or []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        joined = " ".join(argv)
        rc, out = 0, ""
        if any(word in joined for word in self.fail):
            rc = self.rc
        elif " snapshots --json" in joined:
            out = json.dumps([{"id": str(i)} for i in range(self.snapshots)])
        elif " ls --json" in joined:
            out = "\n".join(json.dumps(n) for n in self.listing)
        return subprocess.CompletedProcess(argv, rc, out, self.stderr if rc else "")


@pytest.fixture(autouse=True)
def lock_file(tmp_path, monkeypatch):
    path = tmp_path / "gpufleet-backup.lock"
    monkeypatch.setattr(backup, "LOCK_PATH", str(path))
    return path


def settings(tmp_path, **more):
    cfg = {"host": "node-1", "paths": ["/srv/ckpt"], "exclude": ["*.partial"], "pre_hooks": ["test -e /x"],
           "post_hooks": [], "retention": {"last": 4, "daily": 7, "weekly": 0}, "rpo_minutes": 15,
           "textfile_dir": str(tmp_path), "restic_options": ["-o", "s3.bucket-lookup=dns"]}
    cfg.update(more)
    return cfg


def metrics(tmp_path):
    text = (tmp_path / "gpufleet_backup.prom").read_text()
    return dict(line.split(" ") for line in text.splitlines() if not line.startswith("#"))


def test_a_successful_run_writes_last_success_and_snapshot_count(tmp_path):
    restic = Restic(snapshots=5)
    clock = iter([100.0, 160.0, 160.0])
    backup.Backup(settings(tmp_path), run=restic, now=lambda: next(clock), log=lambda m: None).backup()
    values = metrics(tmp_path)
    assert values["gpufleet_backup_last_success_timestamp_seconds"] == "160"
    assert values["gpufleet_backup_snapshots"] == "5"
    assert values["gpufleet_backup_last_run_success"] == "1"
    assert values["gpufleet_backup_rpo_seconds"] == "900"
    run = next(c for c in restic.calls if "backup" in c)
    assert run[:4] == ["restic", "--no-cache", "-o", "s3.bucket-lookup=dns"]
    assert run[run.index("--exclude") + 1] == "*.partial" and run[-1] == "/srv/ckpt"


def test_a_failing_pre_hook_skips_the_run_and_keeps_the_last_success(tmp_path):
    good = backup.Backup(settings(tmp_path), run=Restic(), now=lambda: 50.0, log=lambda m: None)
    good.backup()
    restic = Restic(fail=("test -e",))
    with pytest.raises(backup.BackupError, match="pre_hooks hook"):
        backup.Backup(settings(tmp_path), run=restic, now=lambda: 90.0, log=lambda m: None).backup()
    assert not [c for c in restic.calls if "backup" in c]
    values = metrics(tmp_path)
    assert values["gpufleet_backup_last_run_success"] == "0"
    assert values["gpufleet_backup_last_success_timestamp_seconds"] == "50"


def test_prune_applies_the_retention_policy(tmp_path):
    restic = Restic()
    backup.Backup(settings(tmp_path), run=restic, now=lambda: 1.0).prune()
    forget = next(c for c in restic.calls if "forget" in c)
    assert "--prune" in forget
    assert forget[forget.index("--keep-last") + 1] == "4" and forget[forget.index("--keep-daily") + 1] == "7"
    assert "--keep-weekly" not in forget


@pytest.mark.parametrize("rc", [10, 1], ids=["restic 0.18", "restic 0.14"])
def test_init_creates_only_a_missing_repository(tmp_path, rc):
    assert backup.Backup(settings(tmp_path), run=Restic()).init() is False
    restic = Restic(fail=("cat config",), rc=rc, stderr=MISSING)
    assert backup.Backup(settings(tmp_path), run=restic).init() is True
    assert any("init" in c for c in restic.calls)


@pytest.mark.parametrize("rc, stderr, says", [
    (12, "Fatal: wrong password or no key found", "its password does not open it"),
    (1, "Fatal: wrong password or no key found", "its password does not open it"),
    (1, "Fatal: unable to open config file: Stat: dial tcp 10.0.2.2:9000: connect: connection refused",
     "cannot tell whether the repository exists"),
    (1, "Fatal: unable to open config file: Stat: SlowDown: Please reduce your request rate.",
     "cannot tell whether the repository exists"),
    (1, "", "cannot tell whether the repository exists"),
], ids=["wrong password (0.18)", "wrong password (0.14)", "store unreachable", "throttled", "says nothing"])
@pytest.mark.parametrize("check", [False, True], ids=["run", "check mode"])
def test_init_never_takes_an_unreadable_repository_for_a_missing_one(tmp_path, rc, stderr, says, check):
    restic = Restic(fail=("cat config",), rc=rc, stderr=stderr)
    with pytest.raises(backup.BackupError, match=says):
        backup.Backup(settings(tmp_path), run=restic).init(check=check)
    assert not any("init" in c for c in restic.calls), restic.calls


def test_init_check_asks_without_creating(tmp_path, capsys):
    restic = Restic(fail=("cat config",), stderr=MISSING)
    assert backup.main(["init", "--check"], factory=lambda: backup.Backup(settings(tmp_path), run=restic)) == 0
    assert json.loads(capsys.readouterr().out) == {"changed": True}
    assert not any("init" in c for c in restic.calls), restic.calls
    assert backup.main(["run", "--check"]) == 2, "only init takes --check"


def test_check_restores_a_sample_and_compares_its_size(tmp_path, monkeypatch):
    listing = [{"type": "dir", "path": "/srv"}, {"type": "file", "path": "/srv/ckpt/a.bin", "size": 3}]

    def run(argv, **kwargs):
        # restic restore writes the file under the target directory.
        if "restore" in argv:
            restored = Path(argv[argv.index("--target") + 1]) / "srv" / "ckpt" / "a.bin"
            restored.parent.mkdir(parents=True)
            restored.write_text(sizes["content"])
        return Restic(listing=listing)(argv)

    sizes = {"content": "abc"}
    backup.Backup(settings(tmp_path), run=run, now=lambda: 7.0, log=lambda m: None).check(rng=random.Random(1))
    assert metrics(tmp_path)["gpufleet_backup_check_last_success_timestamp_seconds"] == "7"
    sizes["content"] = "abcd"
    with pytest.raises(backup.BackupError, match="different file"):
        backup.Backup(settings(tmp_path), run=run, now=lambda: 8.0, log=lambda m: None).check(rng=random.Random(1))


def test_main_usage_and_failures(tmp_path, capsys):
    assert backup.main(["nope"]) == 2
    assert backup.main(["run"], factory=lambda: backup.Backup(settings(tmp_path), run=Restic(fail=("test -e",)))) == 1
    assert "run failed" in capsys.readouterr().err


def test_commands_that_write_wait_for_the_lock_and_give_up_at_the_deadline(tmp_path, monkeypatch, capsys, lock_file):
    # A prune while the backup timer's run holds the lock: restic would
    # refuse the prune's exclusive lock, so the second command waits.
    monkeypatch.setattr(backup, "LOCK_WAIT_SECONDS", 1)
    restic = Restic()
    holder = os.open(str(lock_file), os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        assert backup.main(["prune"], factory=lambda: backup.Backup(settings(tmp_path), run=restic)) == 1
        assert "still holds" in capsys.readouterr().err
        assert restic.calls == [], "nothing ran without the lock"
        # Check mode only reads: it never waits on the lock.
        assert backup.main(["init", "--check"], factory=lambda: backup.Backup(settings(tmp_path), run=restic)) == 0
    finally:
        os.close(holder)
    assert backup.main(["prune"], factory=lambda: backup.Backup(settings(tmp_path), run=restic)) == 0
    assert any("forget" in call for call in restic.calls)
