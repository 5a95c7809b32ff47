"""Checkpoint and resume, end to end: a training job runs on a
node (examples/toy_train.py); the node's AWS metadata service (the loopback
emulator, tests/emulators/instance_metadata.py) announces a spot
interruption; the guard signals the job, which saves its checkpoint and
ends; the guard's checkpoint hook runs the backup role's own services: a
restic backup to object storage (moto's S3 server on this machine), then
the rclone sync that copies the bucket to a second object store (another
moto server, in a process of its own: what teams keep on another cloud).
The node goes away. A new node, given only the backup role's settings
pointed at the second store, restores the checkpoint from the copy, and the
job resumes at the saved step.

Nothing is stubbed between the notice and the resume: the guard, the
backup role, restic, rclone and the job are the ones a user runs."""

from __future__ import annotations

import contextlib
import datetime
import json
import subprocess
import sys


import pytest

from tests.emulators import s3_server
from tests.integration.roles.guard.metadata_node import start_metadata_service
from tests.integration.storage_nodes import HOST_LOOPBACK, apply_role, node, put, sh
from tests.support.nodes import ROOT
from tests.support.ports import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lab

METADATA_PORT = 18169
CKPT = "/srv/ckpt"
JOB = "/usr/local/bin/toy-train"
GUARD_METRICS = "/var/lib/prometheus/node-exporter/gpufleet_guard.prom"
GUARD_STATE = "/var/lib/gpufleet/guard/state.json"
MARKER = "/run/gpufleet-guard/event.json"


BUCKET, COPY = "gpufleet-ckpt", "gpufleet-ckpt-copy"


@contextlib.contextmanager
def separate_store(tmp_path, bucket: str):
    """moto's S3 server in a process of its own (tests/emulators/s3_server.py):
    nothing shared with this process's servers."""
    pidfile = tmp_path / "copy-store.pid"
    script = str(ROOT / "tests" / "emulators" / "s3_server.py")
    port = free_port()
    subprocess.run([sys.executable, script, "--port", str(port), "--pidfile", str(pidfile), "--bucket", bucket],
                   capture_output=True, text=True, check=True)
    try:
        yield port
    finally:
        subprocess.run([sys.executable, script, "--stop", "--pidfile", str(pidfile)], check=False)


def objects(port: int, bucket: str) -> dict[str, int]:
    found = {}
    for page in s3_server.client(port).get_paginator("list_objects_v2").paginate(Bucket=bucket):
        found.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
    return found


def backup_vars(port: int, bucket: str = BUCKET) -> dict:
    # The repository is the job's, not the node's (the prefix defaults to
    # the host name): the replacement node finds it under the same name.
    return {
        "backup_repository_endpoint": f"http://{HOST_LOOPBACK}:{port}",
        "backup_repository_bucket": bucket,
        "backup_repository_prefix": "toy-train",
        "backup_s3_region": "us-east-1",
        "backup_s3_access_key_id": "testing",
        "backup_s3_secret_access_key": "testing-secret",
        "backup_password": "lab-checkpoint-password-0001",
        "backup_paths": [CKPT],
        # No snapshot before the job has saved a whole checkpoint.
        "backup_pre_hooks": [f"test -e {CKPT}/latest"],
    }


GUARD_VARS = {
    "guard_cloud": "aws",
    "guard_spot_enabled": True,
    "guard_metadata_endpoint": f"http://127.0.0.1:{METADATA_PORT}",
    "guard_poll_seconds": 1,
    "guard_idle_enabled": False,
    "guard_job_units": ["toy-train.service"],
    # The backup role's own services, with their environment, lock and
    # metrics: the snapshot, then the copy to the second store.
    "guard_checkpoint_hook": ["/bin/sh", "-ec", "systemctl start gpufleet-backup.service"
                              " && systemctl start gpufleet-rclone-sync.service"],
    "guard_final_action": "none",
}


def install_job(name: str) -> None:
    put(name, ROOT / "examples" / "toy_train.py", JOB)
    sh(name, f"chmod 0755 {JOB}")


def start_job(name: str, steps: int) -> None:
    sh(name, f"systemd-run --unit toy-train --property StandardOutput=file:/var/log/toy-train.log"
             f" /usr/bin/python3 {JOB} --checkpoint-dir {CKPT} --steps {steps} --every 20 --step-seconds 0.02")


def latest(name: str) -> dict:
    pointer = sh(name, f"cat {CKPT}/latest").stdout.strip()
    return json.loads(sh(name, f"cat {CKPT}/{pointer}").stdout)


def rclone_vars(port: int, copy_port: int) -> dict:
    remote = "type = s3\nprovider = Other\naccess_key_id = testing\nsecret_access_key = testing-secret\n"
    return {
        "backup_rclone_enabled": True,
        "backup_rclone_config": f"[first]\n{remote}endpoint = http://{HOST_LOOPBACK}:{port}\n\n"
                                f"[second]\n{remote}endpoint = http://{HOST_LOOPBACK}:{copy_port}\n",
        "backup_rclone_sync": [{"source": f"first:{BUCKET}", "destination": f"second:{COPY}"}],
    }


def test_a_spot_notice_checkpoints_to_object_storage_and_a_new_node_resumes(tmp_path):
    with s3_server.running(buckets=[BUCKET]) as port, separate_store(tmp_path, COPY) as copy_port:
        with node() as first:
            # The node's metadata service, whose notice is /run/gft-notice
            # while that file exists.
            start_metadata_service(first, "aws", METADATA_PORT, "/run/gft-notice", unit="gft-metadata")
            install_job(first)
            start_job(first, steps=1_000_000)
            wait_for(lambda: sh(first, f"test -e {CKPT}/latest", check=False).returncode == 0,
                     "the job's first checkpoint", 120)

            rc, out, _stats = apply_role(first, ("gpufleet.cloud.backup", "gpufleet.cloud.guard"),
                                         {**backup_vars(port), **rclone_vars(port, copy_port), **GUARD_VARS})
            assert rc == 0, out[-4000:]
            wait_for(lambda: 'gpufleet_guard_spot_state{cloud="aws",state="clear"} 1' in
                     sh(first, f"cat {GUARD_METRICS}", check=False).stdout, "the guard's first poll", 60)
            assert sh(first, "systemctl is-active toy-train.service").stdout.strip() == "active"

            deadline = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(
                minutes=3)
            notice = json.dumps({"action": "stop", "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")})
            sh(first, f"printf '%s' '{notice}' > /run/gft-notice")

            landed = 'gpufleet_guard_checkpoint_landed{reason="spot"} 1'
            wait_for(lambda: landed in sh(first, f"cat {GUARD_METRICS}", check=False).stdout,
                     "the guard's checkpoint hook landed", 150)
            # The job ended on the signal, after saving, and the hook waited for it.
            assert sh(first, "systemctl is-active toy-train.service", check=False).stdout.strip() != "active"
            log = sh(first, "cat /var/log/toy-train.log").stdout
            assert "SIGTERM: saved" in log, log
            saved = latest(first)
            marker = json.loads(sh(first, f"cat {MARKER}").stdout)
            assert saved["reason"] == "SIGTERM" and saved["guard_event"] == marker["event_id"], (saved, marker)
            (record,) = json.loads(sh(first, f"cat {GUARD_STATE}").stdout)["events"].values()
            assert record["hook"]["job"]["stopped"] is True, record["hook"]
            assert record["hook"]["landed"] is True and record["hook"]["rc"] == 0, record["hook"]

        # Every object of the repository arrived in the second store, at its size.
        original, copied = objects(port, BUCKET), objects(copy_port, COPY)
        assert any(key.startswith("toy-train/snapshots/") for key in original), sorted(original)
        assert copied == original

        # The first node is gone. Its replacement knows only the backup
        # settings, pointed at the copy: it restores the job's last
        # snapshot from there, and the job resumes.
        with node() as second:
            rc, out, _stats = apply_role(second, "gpufleet.cloud.backup", backup_vars(copy_port, COPY))
            assert rc == 0, out[-4000:]
            sh(second, "set -a; . /etc/gpufleet/backup/restic.env; set +a; restic --no-cache restore latest"
                       " --target /")
            assert latest(second) == saved
            install_job(second)
            done = sh(second, f"/usr/bin/python3 {JOB} --checkpoint-dir {CKPT} --steps {saved['step'] + 40}"
                              " --every 20 --step-seconds 0")
            assert f"resumed at step {saved['step']}" in done.stdout, done.stdout
            final = latest(second)
            assert final["step"] == saved["step"] + 40 and final["reason"] == "done"
