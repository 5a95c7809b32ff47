# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet-backup: one restic backup, retention or verification run.

    gpufleet-backup init     create the repository unless it exists
    gpufleet-backup run      pre hooks, restic backup, post hooks, metrics
    gpufleet-backup prune    restic forget --prune with the retention policy
    gpufleet-backup check    restic check on a subset of the data, then a
                             test restore of a sample file
    gpufleet-backup metrics  rewrite the metrics from the repository

Settings come from /etc/gpufleet/backup/settings.json, the repository,
its credentials and password (file or KMS password command) from the
environment (systemd's EnvironmentFile). Metrics go to node_exporter's
textfile collector, written atomically so a scrape never sees half a file.
Standard library only: it runs on the system Python."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

# The node-side library (gpufleet_textfile.py) is installed next to this
# script by _common's node_library step; python3 -I leaves the script's
# directory off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpufleet_textfile import gauge, sample_text, write_atomic  # noqa: E402  pylint: disable=wrong-import-position,import-error

SETTINGS = "/etc/gpufleet/backup/settings.json"
# Every command that writes to the repository takes this lock first. Its
# timers are independent (a backup every few minutes, a daily prune, a
# weekly check), and restic refuses an exclusive lock (prune) while another
# command of the same host holds one, so an overlap could fail the later unit.
LOCK_PATH = "/run/lock/gpufleet-backup.lock"
LOCK_WAIT_SECONDS = 3600
METRIC_PREFIX = "gpufleet_backup_"


class BackupError(Exception):
    pass


def default_run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


class Backup:
    def __init__(self, settings, run=default_run, now=time.time, log=None):
        self.cfg = settings
        self.run = run
        self.now = now
        self.log = log or (lambda message: sys.stderr.write("gpufleet-backup: %s\n" % message))

    def restic(self, *args):
        result = self.run(["restic", "--no-cache"] + self.cfg.get("restic_options", []) + list(args))
        if result.returncode != 0:
            raise BackupError("restic %s failed: %s" % (args[0], (result.stderr or result.stdout).strip()))
        return result.stdout

    # -- metrics -------------------------------------------------------------
    def _metrics_path(self):
        return os.path.join(self.cfg["textfile_dir"], "gpufleet_backup.prom")

    def read_metrics(self):
        values = {}
        try:
            with open(self._metrics_path()) as handle:
                for line in handle:
                    if line.startswith(METRIC_PREFIX):
                        name, value = line.rsplit(" ", 1)
                        values[name.split("{")[0][len(METRIC_PREFIX):]] = float(value)
        except (IOError, OSError, ValueError):
            pass
        return values

    def write_metrics(self, **updates):
        """Merge updates into the metrics file (atomic rename)."""
        values = self.read_metrics()
        values.update(updates)
        values["rpo_seconds"] = self.cfg["rpo_minutes"] * 60
        helps = {
            "last_success_timestamp_seconds": "Unix time of the last successful backup.",
            "last_run_timestamp_seconds": "Unix time the last backup run ended, successful or not.",
            "last_run_success": "1 if the last backup run succeeded, else 0.",
            "last_duration_seconds": "Seconds the last backup run took.",
            "snapshots": "Snapshots of this host in the repository.",
            "rpo_seconds": "Recovery point objective: the oldest the last success may be.",
            "check_last_success_timestamp_seconds": "Unix time of the last successful restic check and test restore.",
            "prune_last_success_timestamp_seconds": "Unix time of the last successful forget --prune.",
        }
        lines = []
        for name in sorted(values):
            value = values[name]
            lines += gauge(METRIC_PREFIX + name, helps.get(name, name), [({}, sample_text(value))])
        write_atomic(self._metrics_path(), "\n".join(lines) + "\n")

    def snapshots(self):
        return json.loads(self.restic("snapshots", "--json", "--host", self.cfg["host"]) or "[]")

    # -- commands --------------------------------------------------------------
    def init(self, check=False):
        """Create the repository unless it exists; True if it did (or, with
        `check`, would: Ansible's check mode asks without changing it)."""
        result = self.run(["restic", "--no-cache"] + self.cfg.get("restic_options", []) + ["cat", "config"])
        if result.returncode == 0:
            return False
        said = (result.stderr or result.stdout).strip()
        # Only a repository that restic says is not there is created. A
        # wrong password, the network or the store failing is not "missing":
        # init would fail on an existing repository, and check mode would
        # report one to create. restic 0.17 and later exit 10 and 12;
        # Debian 12's 0.14 exits 1 with the same messages.
        if result.returncode == 12 or "wrong password or no key found" in said:
            raise BackupError("the repository exists, but its password does not open it (%s): set backup_password"
                              " or backup_password_kms to the one it was created with, or point"
                              " backup_repository_prefix at a new repository" % said)
        if result.returncode != 10 and "Is there a repository at the following location?" not in said:
            raise BackupError("cannot tell whether the repository exists: restic cat config failed (%d): %s"
                              % (result.returncode, said))
        if not check:
            self.restic("init")
        return True

    def hooks(self, which):
        for command in self.cfg.get(which, []):
            result = self.run(["/bin/sh", "-ec", command])
            if result.returncode != 0:
                raise BackupError("%s hook %r failed (%d): %s" % (which, command, result.returncode,
                                                                  (result.stderr or result.stdout).strip()))

    def backup(self):
        started = self.now()
        try:
            # A failing pre hook (say, no complete checkpoint yet) skips the
            # run: a snapshot of half-written files is worse than none.
            self.hooks("pre_hooks")
            args = ["backup", "--host", self.cfg["host"], "--tag", "gpufleet"]
            for pattern in self.cfg.get("exclude", []):
                args += ["--exclude", pattern]
            self.restic(*(args + self.cfg["paths"]))
            self.hooks("post_hooks")
            count = len(self.snapshots())
        except BackupError:
            self.write_metrics(last_run_success=0, last_run_timestamp_seconds=self.now(),
                               last_duration_seconds=self.now() - started)
            raise
        ended = self.now()
        self.write_metrics(last_success_timestamp_seconds=ended, last_run_success=1,
                           last_run_timestamp_seconds=ended, last_duration_seconds=ended - started, snapshots=count)
        self.log("backup done in %.1fs; %d snapshots" % (ended - started, count))

    def prune(self):
        args = ["forget", "--prune", "--host", self.cfg["host"], "--tag", "gpufleet"]
        for flag, value in sorted(self.cfg["retention"].items()):
            if value:
                args += ["--keep-%s" % flag, str(value)]
        self.restic(*args)
        self.write_metrics(prune_last_success_timestamp_seconds=self.now(), snapshots=len(self.snapshots()))

    def check(self, rng=random):
        self.restic("check", "--read-data-subset", self.cfg.get("check_read_data_subset", "5%"))
        self.test_restore(rng)
        self.write_metrics(check_last_success_timestamp_seconds=self.now())

    def test_restore(self, rng=random):
        """Restore one file of the latest snapshot and compare its size
        with the snapshot's record of it."""
        listing = self.restic("ls", "--json", "--host", self.cfg["host"], "latest")
        files = []
        for line in listing.splitlines():
            try:
                node = json.loads(line)
            except ValueError:
                continue
            if node.get("type") == "file":
                files.append(node)
        if not files:
            self.log("test restore: the latest snapshot has no files")
            return
        sample = rng.choice(files)
        target = tempfile.mkdtemp(prefix="gpufleet-restore-test.")
        try:
            self.restic("restore", "latest", "--host", self.cfg["host"], "--target", target, "--include", sample["path"])
            restored = os.path.join(target, sample["path"].lstrip("/"))
            if not os.path.isfile(restored) or os.path.getsize(restored) != sample.get("size", 0):
                raise BackupError("test restore of %s gave a different file" % sample["path"])
        finally:
            shutil.rmtree(target, ignore_errors=True)
        self.log("test restore of %s matched" % sample["path"])

    def metrics(self):
        self.write_metrics(snapshots=len(self.snapshots()))


class _Lock(object):
    """An exclusive flock on LOCK_PATH, waited for up to LOCK_WAIT_SECONDS."""

    def __enter__(self):
        self.fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.time() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except (IOError, OSError) as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(self.fd)
                    raise BackupError("cannot lock %s: %s" % (LOCK_PATH, exc))
                if time.time() >= deadline:
                    os.close(self.fd)
                    raise BackupError("another gpufleet-backup command still holds %s after %ds"
                                      % (LOCK_PATH, LOCK_WAIT_SECONDS))
                time.sleep(1)

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock
        return False


def main(argv=None, factory=None):
    argv = sys.argv[1:] if argv is None else argv
    commands = ("init", "run", "prune", "check", "metrics")
    if not argv or argv[0] not in commands or argv[1:] not in ([], ["--check"]) or (argv[1:] and argv[0] != "init"):
        sys.stderr.write("usage: gpufleet-backup {%s} (init takes --check)\n" % ",".join(commands))
        return 2
    try:
        if factory:
            backup = factory()
        else:
            with open(SETTINGS) as handle:
                backup = Backup(json.load(handle))
        if argv[1:] == ["--check"]:
            # Check mode only reads the repository's config: no lock, so a
            # drift scan never waits on a running backup.
            print(json.dumps({"changed": backup.init(check=True)}))
        elif argv[0] == "metrics":
            backup.metrics()
        else:
            with _Lock():
                if argv[0] == "init":
                    print(json.dumps({"changed": backup.init()}))
                else:
                    getattr(backup, "backup" if argv[0] == "run" else argv[0])()
    except (BackupError, IOError, OSError, ValueError) as exc:
        sys.stderr.write("gpufleet-backup %s failed: %s\n" % (argv[0], exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
