"""The node doctor's repair ladder end to end (docs/node-doctor.md), on
real nodes with node_health and the guard as a user runs them, the
example training job (examples/toy_train.py), each cloud's API emulator
on this machine, and the fleet breaker in an S3 store (moto's server):

- Alibaba Cloud, the whole ladder: three catalogue XID 13 lines in the
  kernel log node_health reads (RESTART_APP's threshold); the breaker
  grants the node its place; the job checkpoints (its checkpoint names
  the repair's event) and stops; a new XID 13 after each rung takes the
  next: the GPU reset (nobody holds it), then the reboot through ECS
  RebootInstance, which restarts the node's container as the cloud
  restarts an instance. Back from the boot, node_health's report has no
  occurrence since it: the repair is cleared, the place given back, and
  node_health passes (XID 13 is an application's fault, which its XID
  check ignores).
- Tencent Cloud, on the same node: XID 79 (the GPU fell off the bus,
  RESTART_BM) goes from the checkpoint straight to the reboot through CVM
  RebootInstances, and clears after the boot.
- Huawei Cloud, on a second node of the same group: XID 79 trips there
  too, but the group's one place is taken (the first node counts for the
  breaker's window): the repair waits for the breaker, and nothing happens
  to the node: no checkpoint, no signal, no reboot call."""

from __future__ import annotations

import contextlib
import datetime
import json
import subprocess

import pytest

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators import s3_server
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.integration.storage_nodes import HOST_LOOPBACK, apply_role, node, put, sh
from tests.support.nodes import ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lab

API = {"aliyun": AliyunEmulator, "tencent": TencentEmulator, "huawei": HuaweiEmulator}
REGIONS = {"aliyun": "cn-hangzhou", "tencent": "ap-guangzhou", "huawei": "cn-north-4"}
TYPES = {"aliyun": "ecs.gn7i-c8g1.2xlarge", "tencent": "GN7.2XLARGE32", "huawei": "pi2.2xlarge.4"}
KEYS = {"access_key_id": "AKIDgpufleetlab", "secret_access_key": "gpufleet-lab-repair-secret"}
BUCKET = "gpufleet-breaker"
STATE = "/var/lib/gpufleet/guard/state.json"
REPORT = "/var/lib/gpufleet/health/report.json"
KERNEL_LOG = "/var/log/gft-kern.log"
SMI_LOG = "/var/log/gft-nvidia-smi.log"
JOB, CKPT = "/usr/local/bin/toy-train", "/srv/ckpt"
PCI = "0000:3b:00"
# The node's stand-in nvidia-smi (no GPU in a container): one healthy GPU
# for node_health's query and its XML report (no row remap pending or
# failed); no process holds it, and a reset goes through. Every call is
# logged.
SMI = f"""#!/usr/bin/python3
import sys
args = sys.argv[1:]
with open("{SMI_LOG}", "a") as log:
    log.write(" ".join(args) + "\\n")
GPU = {{"index": "0", "pci.bus_id": "00000000:3B:00.0", "driver_version": "550.54.15",
       "persistence_mode": "Enabled", "ecc.mode.current": "Enabled", "ecc.errors.uncorrected.volatile.total": "0",
       "pcie.link.gen.current": "4", "pcie.link.gen.max": "4", "pcie.link.width.current": "16",
       "pcie.link.width.max": "16", "pstate": "P0"}}
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is not None:
    print(", ".join(GPU.get(field, "[N/A]") for field in query.split(",")))
elif args == ["-q", "-x"]:
    print("<nvidia_smi_log><gpu id='00000000:3B:00.0'><pci><pci_bus_id>00000000:3B:00.0</pci_bus_id></pci>"
          "<remapped_rows><remapped_row_pending>No</remapped_row_pending>"
          "<remapped_row_failure>No</remapped_row_failure></remapped_rows></gpu></nvidia_smi_log>")
elif any(a.startswith("--query-compute-apps") for a in args):
    pass
elif "--gpu-reset" in args:
    print("GPU 00000000:3B:00.0 was successfully reset.")
else:
    sys.exit(9)
"""


def restart_container(name: str) -> None:
    subprocess.run(["podman", "restart", "-t", "10", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def lab():
    """(first node, second node, cloud -> emulator, cloud -> instance, the store's port)."""
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(s3_server.running(buckets=[BUCKET]))
        apis = {cloud: stack.enter_context(emulator()) for cloud, emulator in API.items()}
        instances = {cloud: apis[cloud].seed([{"region": REGIONS[cloud], "instance_type": TYPES[cloud]}])[0]
                     for cloud in API}
        first, second = stack.enter_context(node()), stack.enter_context(node())
        for name in (first, second):
            put_text(name, SMI, "/usr/local/bin/gft-nvidia-smi", "0755")
            put(name, ROOT / "examples" / "toy_train.py", JOB)
            sh(name, f"chmod 0755 {JOB} && touch {KERNEL_LOG}")
        # Each cloud restarts the node that is its instance.
        apis["aliyun"].on_reboot = apis["tencent"].on_reboot = lambda _inst: restart_container(first)
        apis["huawei"].on_reboot = lambda _inst: restart_container(second)
        yield first, second, apis, instances, port


def put_text(name: str, text: str, dest: str, mode: str) -> None:
    sh(name, f"cat > {dest} <<'GFT_EOF'\n{text}GFT_EOF\nchmod {mode} {dest}")


def node_vars(lab, cloud: str) -> dict:
    _first, _second, apis, instances, port = lab
    return {
        "guard_cloud": cloud, "guard_spot_enabled": False, "guard_idle_enabled": False,
        "guard_maintenance_enabled": False, "guard_poll_seconds": 1, "guard_checkpoint_seconds": 60,
        "guard_job_units": ["toy-train.service"], "guard_nvidia_smi_path": "/usr/local/bin/gft-nvidia-smi",
        "guard_stop_instance_id": instances[cloud]["instance_id"], "guard_stop_region": REGIONS[cloud],
        "guard_stop_endpoint": f"http://{HOST_LOOPBACK}:{apis[cloud].port}", "guard_stop_credentials": KEYS,
        "guard_repair_classes": ["RESTART_APP", "RESTART_BM"],
        "guard_repair_breaker_bucket": BUCKET, "guard_repair_breaker_region": "us-east-1",
        "guard_repair_breaker_endpoint": f"http://{HOST_LOOPBACK}:{port}",
        "guard_repair_breaker_credentials": {"access_key_id": "testing", "secret_access_key": "testing-secret"},
        "node_health_kernel_log_path": KERNEL_LOG, "node_health_expected_gpu_count": 1,
        "node_health_nvidia_smi_path": "/usr/local/bin/gft-nvidia-smi",
    }


def converge(lab, name: str, cloud: str) -> None:
    """node_health and the guard for this cloud, the guard starting afresh,
    the job running and checkpointed once."""
    sh(name, f"systemctl stop gpufleet-guard toy-train 2>/dev/null || true; rm -f {STATE} {SMI_LOG} {REPORT};"
             f" : > {KERNEL_LOG}")
    sh(name, f"systemd-run --unit toy-train /usr/bin/python3 {JOB} --checkpoint-dir {CKPT} --steps 100000000"
             " --every 100000 --step-seconds 0.02 --marker /run/gpufleet-guard/event.json")
    rc, out, stats = apply_role(name, ("gpufleet.cloud.node_health", "gpufleet.cloud.guard"), node_vars(lab, cloud))
    assert rc == 0 and stats.get("failed") == 0, out[-4000:]
    assert KEYS["secret_access_key"] not in out
    wait_for(lambda: sh(name, "systemctl is-active gpufleet-guard", check=False).returncode == 0,
             "the guard running", 60)


def xid(name: str, code: int) -> None:
    """One catalogue line of XID ``code`` on the GPU, as syslog writes the
    kernel's (an RFC 3339 time), then node_health's run, as its timer
    would (not waited for: a failed check fails the unit's run)."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
    line = f"{now} {name} kernel: NVRM: Xid (PCI:{PCI}): {code}, pid=4242, name=python3, Ch 00000008\n"
    sh(name, f"printf '%s' '{line}' >> {KERNEL_LOG} && systemctl start --no-block gpufleet-health.service")


def repair(name: str) -> dict | None:
    result = sh(name, f"cat {STATE}", check=False)
    if result.returncode != 0 or not result.stdout.strip():
        return None
    records = list(json.loads(result.stdout).get("repairs", {}).values())
    return records[-1] if records else None


def leases(port: int) -> list[dict]:
    body = s3_server.client(port).get_object(Bucket=BUCKET, Key="gpufleet/breaker/all.json")["Body"].read()
    return json.loads(body)["leases"]


def latest_checkpoint(name: str) -> dict:
    pointer = sh(name, f"cat {CKPT}/latest").stdout.strip()
    return json.loads(sh(name, f"cat {CKPT}/{pointer}").stdout)


def back_from_reboot(name: str, record_key: str) -> dict:
    """The repair, cleared, once the node is back from the reboot the cloud's
    emulator gave it (its container restarted)."""
    wait_for(lambda: sh(name, "systemctl is-system-running --wait", check=False).returncode in (0, 1),
             "the node back from its reboot", 120)
    # Cleared is saved before the breaker's place is given back: both.
    return wait_for(lambda: (r := repair(name)) and r["fault"] == record_key and r["state"] == "cleared"
                    and r["steps"][-1]["step"] == "breaker_release" and r,
                    "the repair cleared after the boot, and its place given back", 120)


def storm(name: str, code: int) -> None:
    """A fault that stays until the node reboots: XID ``code`` every tenth
    of a second, from a transient unit that the reboot ends; node_health
    runs once, as its timer would, and the guard runs it after each rung."""
    line = f"%s {name} kernel: NVRM: Xid (PCI:{PCI}): {code}, pid=4242, name=python3, Ch 00000008\\n"
    sh(name, f"systemd-run --unit gft-xid-storm /bin/sh -c 'while :; do printf \"{line}\""
             f" \"$(date -u +%Y-%m-%dT%H:%M:%S.%6N+00:00)\" >> {KERNEL_LOG}; sleep 0.1; done'"
             " && sleep 1 && systemctl start --no-block gpufleet-health.service")


def test_alibaba_the_whole_ladder_up_to_a_reboot_through_ecs_then_cleared(lab):
    first, _second, apis, instances, port = lab
    emulator = apis["aliyun"]
    converge(lab, first, "aliyun")
    boot_before = sh(first, "cat /proc/1/stat").stdout.split(")")[-1].split()[19]

    # RESTART_APP trips at its third line within the hour, and the fault
    # comes back after each rung that does not cure it.
    storm(first, 13)
    wait_for(lambda: emulator.reboots, "ECS's reboot call, after the job's restart and the GPU reset", 120)
    assert emulator.reboots == [{"instance_id": instances["aliyun"]["instance_id"], "force_stop": "False"}]
    record = back_from_reboot(first, f"xid-13-{PCI}")
    assert sh(first, "cat /proc/1/stat").stdout.split(")")[-1].split()[19] != boot_before
    assert [s["step"] for s in record["steps"]] == [
        "breaker", "checkpoint", "restart_app", "reset_gpu", "reboot", "breaker_release"], record["steps"]
    assert record["class"] == "RESTART_APP" and record["rung"] == "reboot", record
    # The job saved its checkpoint, naming the repair's event, and stopped.
    assert latest_checkpoint(first)["guard_event"] == f"repair-{record['id']}", latest_checkpoint(first)
    assert sh(first, "systemctl is-active toy-train", check=False).stdout.strip() != "active"
    # The reset only once nvidia-smi listed no process on the GPU.
    calls = sh(first, f"cat {SMI_LOG}").stdout.splitlines()
    reset = next(i for i, c in enumerate(calls) if "--gpu-reset" in c)
    assert f"-i {PCI}.0" in calls[reset] and any("--query-compute-apps" in c for c in calls[:reset]), calls
    assert emulator.count("RebootInstance") == 1 and emulator.stops == []
    # The place given back; node_health passes after the boot.
    assert [(lease["node"], bool(lease.get("released"))) for lease in leases(port)] == [(first, True)]
    report = json.loads(sh(first, f"cat {REPORT}").stdout)
    assert report["status"] == "pass", report


def test_tencent_a_gpu_off_the_bus_checkpoints_and_reboots_through_cvm(lab):
    first, _second, apis, instances, _port = lab
    emulator = apis["tencent"]
    converge(lab, first, "tencent")
    xid(first, 79)
    wait_for(lambda: emulator.reboots, "CVM's reboot call", 90)
    assert emulator.reboots == [{"instance_id": instances["tencent"]["instance_id"], "stop_type": "SOFT_FIRST"}]
    record = back_from_reboot(first, f"xid-79-{PCI}")
    # Its class starts at the reboot: after the breaker and the checkpoint.
    assert record["class"] == "RESTART_BM" and [s["step"] for s in record["steps"]] == [
        "breaker", "checkpoint", "reboot", "breaker_release"], record
    assert latest_checkpoint(first)["guard_event"] == f"repair-{record['id']}"
    assert emulator.count("RebootInstances") == 1


def test_huawei_a_second_node_finds_the_breaker_full_and_nothing_happens_to_it(lab):
    first, second, apis, _instances, port = lab
    emulator = apis["huawei"]
    converge(lab, second, "huawei")
    xid(second, 79)
    record = wait_for(lambda: (r := repair(second)) and r["state"] == "waiting" and r["why"] and r,
                      "the breaker's answer", 90)
    assert record["why"].startswith("the fleet breaker is full") and first in record["why"], record
    # Five more polls: it keeps waiting, and nothing is done meanwhile.
    polls = set()

    def polled():
        polls.add(sh(second, "stat -c %.9Y /var/lib/prometheus/node-exporter/gpufleet_guard.prom").stdout)
        return len(polls) >= 5

    wait_for(polled, "five more polls", 60)
    record = repair(second)
    assert (record["state"], record["rung"], record["steps"]) == ("waiting", None, []), record
    assert sh(second, "systemctl is-active toy-train").stdout.strip() == "active"
    # The job got no signal: it saves only on one, or every 100000 steps.
    assert sh(second, f"test -e {CKPT}/latest", check=False).returncode != 0
    assert json.loads(sh(second, f"cat {STATE}").stdout)["events"] == {}
    assert emulator.reboots == [] and emulator.count("BatchRebootServers") == 0
    assert second not in [lease["node"] for lease in leases(port)]
