"""backup on a real node against a real S3 server (moto's, on the host's
127.0.0.1, reached by the node at 10.0.2.2 through slirp4netns).

The tests share one node (CI budget: each node cost a boot and restic's
install). Each test converges the role with its own settings and a
repository of its own (backup_repository_prefix: the moto servers of one
process share their buckets), so each holds alone as well as after the
others. The node starts with the KMS SDKs installed,
which the KMS test needs and the others do not touch."""

from __future__ import annotations

import json
import time

import pytest

from tests.emulators import s3_server
from tests.integration.storage_nodes import HOST_LOOPBACK, apply_role, node, sh

pytestmark = pytest.mark.lab

ROLE = "gpufleet.cloud.backup"
PROM = "/var/lib/prometheus/node-exporter/gpufleet_backup.prom"


@pytest.fixture
def s3():
    with s3_server.running(buckets=["gpufleet-backup"]) as port:
        yield port


@pytest.fixture(scope="module")
def backup_node(kms_node_image):
    with node(kms_node_image) as name:
        yield name


def role_vars(port, repository, **more):
    variables = {
        "backup_repository_prefix": repository,
        "backup_repository_endpoint": f"http://{HOST_LOOPBACK}:{port}",
        "backup_repository_bucket": "gpufleet-backup",
        "backup_s3_region": "us-east-1",
        "backup_s3_access_key_id": "testing",
        "backup_s3_secret_access_key": "testing-secret",
        "backup_password": "lab-repository-password-0001",
        "backup_paths": ["/srv/data"],
        "backup_exclude": ["*.partial"],
        "backup_pre_hooks": ["test -e /srv/data/COMPLETE"],
    }
    variables.update(more)
    return variables


def metrics(name):
    text = sh(name, f"cat {PROM}").stdout
    return {k: float(v) for k, v in (line.split(" ") for line in text.splitlines() if not line.startswith("#"))}


def checksums(name, root):
    out = sh(name, f"cd {root} && find . -type f -print0 | sort -z | xargs -0 sha256sum").stdout
    return dict(reversed(line.split(None, 1)) for line in out.splitlines())


def test_back_up_change_delete_restore_and_compare(s3, backup_node):
    name = backup_node
    sh(name, "mkdir -p /srv/data/ckpt && head -c 3000000 /dev/urandom > /srv/data/ckpt/model.bin"
             " && echo step-1 > /srv/data/COMPLETE && echo meta > /srv/data/ckpt/meta.json"
             " && echo half > /srv/data/ckpt/opt.partial")
    rc, out, stats = apply_role(name, ROLE, role_vars(s3, "restore"))
    assert rc == 0 and stats["failed"] == 0, out[-4000:]
    assert stats["changed"] > 0
    original = checksums(name, "/srv/data")

    # The timer may already have run once (its boot delay has passed).
    sh(name, "systemctl start gpufleet-backup.service")
    assert metrics(name)["gpufleet_backup_snapshots"] >= 1
    # Change one file, delete another.
    sh(name, "echo corrupted > /srv/data/ckpt/model.bin && rm /srv/data/ckpt/meta.json")
    assert checksums(name, "/srv/data") != original

    sh(name, "set -a; . /etc/gpufleet/backup/restic.env; set +a; restic --no-cache restore latest --target /restore")
    restored = checksums(name, "/restore/srv/data")
    expected = {path: digest for path, digest in original.items() if not path.endswith(".partial")}
    assert restored == expected
    sh(name, "systemctl start gpufleet-backup-check.service")
    assert metrics(name)["gpufleet_backup_check_last_success_timestamp_seconds"] > 0
    sh(name, "systemctl start gpufleet-backup-prune.service")

    rc, out, stats = apply_role(name, ROLE, role_vars(s3, "restore"))
    assert rc == 0 and stats["changed"] == 0, out[-4000:]
    assert "lab-repository-password-0001" not in out and "testing-secret" not in out
    assert sh(name, "stat -c %a /etc/gpufleet/backup/repository.password").stdout.strip() == "600"


def test_two_timer_cycles_meet_the_rpo(s3, backup_node, record_property):
    """RPO 1 min: a run every 20 s, each stopped after 30 s at most."""
    name = backup_node
    sh(name, "mkdir -p /srv/data && echo step-1 > /srv/data/COMPLETE && echo a > /srv/data/a")
    fast = {"backup_rpo_minutes": 1, "backup_interval_seconds": 20, "backup_max_runtime_seconds": 30}
    rc, out, _stats = apply_role(name, ROLE, role_vars(s3, "rpo", **fast))
    assert rc == 0, out[-4000:]
    # The timer's first run is 60 s after boot; start the cycle now.
    sh(name, "systemctl start gpufleet-backup.service")
    successes = [metrics(name)["gpufleet_backup_last_success_timestamp_seconds"]]
    deadline = time.monotonic() + 120
    while len(successes) < 3 and time.monotonic() < deadline:
        time.sleep(2)
        last = metrics(name)["gpufleet_backup_last_success_timestamp_seconds"]
        if last != successes[-1]:
            successes.append(last)
    assert len(successes) == 3, f"the timer ran {len(successes) - 1} cycles in 120 s"
    gaps = [b - a for a, b in zip(successes, successes[1:])]
    record_property("achieved_rpo_seconds", max(gaps))
    print(f"measured RPO: successes {gaps} s apart; worst {max(gaps):.1f} s against 60 s")
    assert max(gaps) <= 60
    assert metrics(name)["gpufleet_backup_snapshots"] >= 3
    timers = sh(name, "systemctl list-timers --all --output json --no-pager", check=False)
    if timers.returncode == 0 and timers.stdout.startswith("["):
        assert any(t.get("unit") == "gpufleet-backup.timer" for t in json.loads(timers.stdout))
    # The node is shared: no fast cycle runs into the next test's converge.
    sh(name, "systemctl stop gpufleet-backup.timer")


def test_kms_wrapped_repository_password(s3, backup_node):
    """The password is a data key wrapped by KMS (the Tencent emulator):
    restic gets it from gpufleet-kms through a pipe, and no file holds it.
    The node starts with the KMS SDKs installed (kms_node_image)."""
    from tests.emulators import kms_common, kms_tencent
    from tests.integration.storage_nodes import files_containing

    name = backup_node
    with kms_common.running(kms_tencent.TencentKmsHandler, ["backup-key"]) as kms:
        sh(name, "mkdir -p /srv/data && echo step-1 > /srv/data/COMPLETE && echo a > /srv/data/a")
        password_kms = {"provider": "tencent", "key_id": "backup-key", "region": "ap-guangzhou",
                        "endpoint": f"http://{HOST_LOOPBACK}:{kms.server_port}",
                        "credentials": {"access_key": "AKIDlab", "secret_key": "lab-kms-secret"}}
        rc, out, _stats = apply_role(name, ROLE, role_vars(s3, "kms", backup_password="", backup_password_kms=password_kms))
        assert rc == 0, out[-4000:]
        env = sh(name, "cat /etc/gpufleet/backup/restic.env").stdout
        assert "RESTIC_PASSWORD_COMMAND='/usr/local/sbin/gpufleet-kms decrypt" in env
        assert sh(name, "test -e /etc/gpufleet/backup/repository.password", check=False).returncode == 1
        sh(name, "systemctl start gpufleet-backup.service")
        assert metrics(name)["gpufleet_backup_snapshots"] >= 1
        password = sh(name, "gpufleet-kms decrypt /etc/gpufleet/kms/backup-repository.envelope --encoding hex"
                            " --credentials /etc/gpufleet/backup/kms-credentials.json").stdout.strip()
        assert len(password) == 64
        assert files_containing(name, bytes.fromhex(password)) == []
