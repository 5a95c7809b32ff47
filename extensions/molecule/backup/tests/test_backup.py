"""What a node converged by gpufleet.cloud.backup really has, against
moto's S3 server on the host (10.0.2.2 from the node)."""

from __future__ import annotations

import pytest
from conftest import assert_dropin_moved_aside, assert_file, assert_package, assert_unit_running

from tests.support.waiting import wait_for

PROM = "/var/lib/prometheus/node-exporter/gpufleet_backup.prom"
RESTIC = "set -a; . /etc/gpufleet/backup/restic.env; set +a; restic --no-cache"


def metrics(host):
    text = host.file(PROM).content_string
    return {k: float(v) for k, v in (line.split(" ") for line in text.splitlines() if not line.startswith("#"))}


@pytest.mark.parametrize("name", ["restic", "rclone"])
def test_packages(host, name):
    assert_package(host, name)


def test_secrets_are_0600(host):
    assert_file(host, "/etc/gpufleet/backup/repository.password", mode=0o600)
    assert_file(host, "/etc/gpufleet/backup/rclone.conf", mode=0o600)
    env = assert_file(host, "/etc/gpufleet/backup/restic.env", mode=0o600,
                      contains=("RESTIC_PASSWORD_FILE=/etc/gpufleet/backup/repository.password",))
    repository = next(line for line in env.splitlines() if line.startswith("RESTIC_REPOSITORY="))
    assert repository.split("=", 1)[1].strip("'") == f"s3:http://10.0.2.2:39151/gpufleet-backup/{host.backend.hostname}"


@pytest.mark.parametrize("timer", ["gpufleet-backup", "gpufleet-backup-prune", "gpufleet-backup-check", "gpufleet-rclone-sync"])
def test_timers_are_active(host, timer):
    assert_unit_running(host, f"{timer}.timer")


def test_a_drop_in_that_overrode_the_sync_schedule_is_moved_aside(host):
    # prepare.yml's drop-in made the sync yearly.
    assert_dropin_moved_aside(host, "gpufleet-rclone-sync.timer", "yearly.conf", "OnCalendar=yearly")


def test_timer_period_meets_the_rpo(host):
    timer = assert_file(host, "/etc/systemd/system/gpufleet-backup.timer")
    assert "OnUnitActiveSec=600" in timer and "AccuracySec=1s" in timer
    assert "TimeoutStartSec=240" in host.file("/etc/systemd/system/gpufleet-backup.service").content_string


def _no_run_pending(host):
    return (host.run("systemctl is-active gpufleet-backup.service").stdout.strip() != "activating"
            and not host.run("systemctl list-jobs --no-legend gpufleet-backup.service").stdout.strip())


@pytest.fixture(scope="module")
def timer_held(host):
    """The backup timer stopped, and no run it started still going, while a
    test starts runs by hand. The timer's first run comes 60 s after boot,
    which on a busy machine falls inside this verify: a hand-started start
    then joins a run begun before the test moved a marker, and the test
    would judge a run it did not make."""
    host.run("systemctl stop gpufleet-backup.timer")
    wait_for(lambda: _no_run_pending(host), "a timer-started gpufleet-backup.service to end", seconds=240)
    yield
    host.run("systemctl start gpufleet-backup.timer")


@pytest.mark.usefixtures("timer_held")
def test_a_run_backs_up_complete_checkpoints_and_writes_metrics(host):
    assert host.run("systemctl start gpufleet-backup.service").rc == 0
    values = metrics(host)
    assert values["gpufleet_backup_last_run_success"] == 1
    assert values["gpufleet_backup_snapshots"] >= 1
    assert values["gpufleet_backup_rpo_seconds"] == 900
    assert host.file("/run/gpufleet-backup-post-hook").exists
    files = host.run(f"{RESTIC} ls latest").stdout
    assert "/srv/checkpoints/step-100/model.bin" in files
    assert "optimizer.partial" not in files


@pytest.mark.usefixtures("timer_held")
def test_a_failing_pre_hook_skips_the_run(host):
    before = metrics(host)["gpufleet_backup_last_success_timestamp_seconds"]
    host.run("mv /srv/checkpoints/COMPLETE /srv/checkpoints/COMPLETE.off")
    try:
        assert host.run("systemctl start gpufleet-backup.service").rc != 0
        values = metrics(host)
        assert values["gpufleet_backup_last_run_success"] == 0
        assert values["gpufleet_backup_last_success_timestamp_seconds"] == before
    finally:
        host.run("mv /srv/checkpoints/COMPLETE.off /srv/checkpoints/COMPLETE")
        host.run("systemctl reset-failed gpufleet-backup.service")


@pytest.mark.usefixtures("timer_held")
def test_check_with_test_restore_and_prune(host):
    assert host.run("systemctl start gpufleet-backup-check.service").rc == 0
    assert metrics(host)["gpufleet_backup_check_last_success_timestamp_seconds"] > 0
    assert host.run("systemctl start gpufleet-backup-prune.service").rc == 0
    assert metrics(host)["gpufleet_backup_prune_last_success_timestamp_seconds"] > 0
