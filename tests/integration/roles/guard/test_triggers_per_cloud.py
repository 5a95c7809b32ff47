"""The guard's triggers against each cloud's emulators, on one lab node,
each ending in the final action ``stop`` through that cloud's
official SDK, which the role installs on the node, against that cloud's
API emulator on this machine:

- Alibaba Cloud: a spend cap reached at once; ECS StopInstance with
  StoppedMode StopCharging, the first call throttled as ECS throttles;
  exactly one stop, and none again after a restart of the daemon;
- Tencent Cloud: the spot notice from the node's Tencent metadata service
  (UTC+8, no zone); first that service fails in each way (500, a garbage
  body, a dropped connection, a hang past the time-out), and none of them
  is a notice; then CVM StopInstances with STOP_CHARGING, once;
- AWS: the spot notice through IMDSv2 tokens; EC2 StopInstances (moto),
  once;
- Huawei Cloud: no spot notice exists inside the instance, and the guard
  says "unsupported"; idle GPUs (a stand-in nvidia-smi): one GPU that
  cannot be read keeps the node busy, then both below the threshold for
  the window (a minute); ECS BatchStopServers, once.

On Alibaba, Tencent and Huawei the guard also reads the maintenance the
cloud scheduled for the instance through its API (ECS
DescribeInstanceHistoryEvents, CVM DescribeTaskInfo, ECS
ListScheduledEvents) with the same SDK and key: each emulator holds one
event two days ahead, which the guard reports as scheduled, with its
window, and does not act on yet.

The role runs once per cloud on the same node, its state cleared in
between as on a new node. The checkpoint hook's path is the end-to-end
test's (test_checkpoint_resume.py)."""

from __future__ import annotations

import contextlib
import datetime
import json

import pytest

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.integration.roles.guard.metadata_node import start_metadata_service
from tests.integration.storage_nodes import HOST_LOOPBACK, apply_role, node, sh
from tests.support.waiting import wait_for

pytestmark = pytest.mark.lab

API = {"aws": AwsEmulator, "aliyun": AliyunEmulator, "tencent": TencentEmulator, "huawei": HuaweiEmulator}
REGIONS = {"aws": "us-east-1", "aliyun": "cn-hangzhou", "tencent": "ap-guangzhou", "huawei": "cn-north-4"}
TYPES = {"aws": "g5.xlarge", "aliyun": "ecs.gn7i-c8g1.2xlarge", "tencent": "GN7.2XLARGE32", "huawei": "pi2.2xlarge.4"}
METADATA_PORTS = {"aws": 18171, "aliyun": 18172, "tencent": 18173, "huawei": 18174}
GUARD_STATE = "/var/lib/gpufleet/guard/state.json"
GUARD_METRICS = "/var/lib/prometheus/node-exporter/gpufleet_guard.prom"
MARKER = "/run/gpufleet-guard/event.json"
SECRET = "gpufleet-lab-stop-secret-7f3a"
KEYS = {"access_key_id": "AKIDgpufleetlab", "secret_access_key": SECRET}


def scheduled_event(cloud: str, inst: dict) -> dict:
    """One maintenance event two days ahead, in the cloud's own words."""
    start = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(days=2)
    iso = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    if cloud == "aliyun":
        return {"EventId": "e-lab-maintenance", "EventType": {"Code": 1, "Name": "SystemMaintenance.Reboot"},
                "EventCycleStatus": {"Code": 24, "Name": "Scheduled"}, "NotBefore": iso,
                "InstanceId": inst["instance_id"]}
    if cloud == "tencent":
        local = start.astimezone(datetime.timezone(datetime.timedelta(hours=8))).strftime("%Y-%m-%d %H:%M:%S")
        return {"TaskId": "rep-lab00001", "InstanceId": inst["instance_id"], "TaskTypeId": 107, "TaskStatus": 4,
                "CreateTime": "2026-12-01 10:00:00", "AuthTime": local}
    return {"id": "lab-maintenance-0001", "type": "instance-reboot", "state": "scheduled", "not_before": iso,
            "not_after": None, "instance_id": inst["instance_id"]}


def maintenance_scheduled(name: str, cloud: str, code: str) -> bool:
    text = metrics(name)
    return (f'gpufleet_guard_maintenance_state{{cloud="{cloud}",state="scheduled"}} 1' in text
            and f'gpufleet_guard_maintenance_window_start_timestamp_seconds{{code="{code}"' in text)


@pytest.fixture(scope="module")
def lab():
    """(node, cloud -> API emulator, cloud -> the node's instance there)."""
    with contextlib.ExitStack() as stack:
        apis = {cloud: stack.enter_context(emulator()) for cloud, emulator in API.items()}
        instances = {cloud: apis[cloud].seed([{"region": REGIONS[cloud], "instance_type": TYPES[cloud]}])[0]
                     for cloud in API}
        for cloud in ("aliyun", "tencent", "huawei"):
            apis[cloud].schedule_event(instances[cloud], scheduled_event(cloud, instances[cloud]))
        name = stack.enter_context(node())
        # Each cloud's metadata service on the node's loopback, with its
        # notice and its fault in files the tests write.
        for cloud, port in METADATA_PORTS.items():
            start_metadata_service(name, cloud, port, f"/run/gft-notice-{cloud}", f"/run/gft-fault-{cloud}")
        yield name, apis, instances


def guard_vars(lab, cloud: str, **extra) -> dict:
    _name, apis, instances = lab
    return {
        "guard_cloud": cloud,
        "guard_spot_enabled": True,
        "guard_metadata_endpoint": f"http://127.0.0.1:{METADATA_PORTS[cloud]}",
        "guard_idle_enabled": False,
        "guard_poll_seconds": 1,
        "guard_checkpoint_seconds": 30,
        "guard_final_action": "stop",
        "guard_stop_instance_id": instances[cloud]["instance_id"],
        "guard_stop_region": REGIONS[cloud],
        "guard_stop_endpoint": f"http://{HOST_LOOPBACK}:{apis[cloud].port}",
        "guard_stop_credentials": KEYS,
        **extra,
    }


def converge(lab, cloud: str, **extra) -> None:
    """The role for this cloud, on a node whose guard starts afresh."""
    name = lab[0]
    sh(name, f"systemctl stop gpufleet-guard 2>/dev/null || true; rm -f {GUARD_STATE} {MARKER} {GUARD_METRICS}")
    rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(lab, cloud, **extra))
    assert rc == 0 and stats.get("failed") == 0, out[-4000:]
    assert SECRET not in out


def metrics(name: str) -> str:
    return sh(name, f"cat {GUARD_METRICS}", check=False).stdout


def spot_state(name: str, cloud: str, state: str) -> bool:
    return f'gpufleet_guard_spot_state{{cloud="{cloud}",state="{state}"}} 1' in metrics(name)


def the_event(name: str) -> dict:
    events = json.loads(sh(name, f"cat {GUARD_STATE}").stdout)["events"]
    (only,) = events.values()
    return only


def finished(name: str) -> bool:
    result = sh(name, f"cat {GUARD_STATE}", check=False)
    if result.returncode != 0:
        return False
    return any(e.get("final") for e in json.loads(result.stdout)["events"].values())


def test_aliyun_a_spend_cap_stops_the_instance_exactly_once(lab):
    name, apis, instances = lab
    emulator, inst = apis["aliyun"], instances["aliyun"]
    settings = {"guard_spot_enabled": False, "guard_price_per_hour": 3600, "guard_node_cap": 1}  # 1 a second
    # ECS's throttling answer to the first stop call.
    emulator.faults.throttle(1, action="StopInstance")

    # Check mode on the fresh node reports the changes and makes none: no
    # SDK environment, no call.
    rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(lab, "aliyun", **settings), "--check")
    assert rc == 0 and stats.get("changed", 0) > 0, out[-4000:]
    assert sh(name, "test -e /opt/gpufleet/guard-sdk", check=False).returncode != 0
    assert emulator.count() == 0

    converge(lab, "aliyun", **settings)
    wait_for(lambda: emulator.stops, "the guard's stop call", 120)
    assert emulator.stops == [{"instance_id": inst["instance_id"], "stopped_mode": "StopCharging",
                               "force_stop": "False"}]
    assert inst["state"] == "stopped"
    wait_for(lambda: finished(name), "the guard's record of its final action", 30)
    event = the_event(name)
    assert event["reason"] == "budget"
    # The throttled call said "try again" (exit 1), the next one stopped it.
    final = event["final"]
    assert final["ok"] is True and [a["rc"] for a in final["attempts"]] == [1, 0], final
    assert '"outcome": "stopped"' in final["attempts"][1]["detail"], final
    assert emulator.count("StopInstance") == 2

    # The access key is on the node in one file, which only root reads.
    assert sh(name, f"grep -rl {SECRET} /etc /var/lib /run /opt/gpufleet /usr/local || true").stdout.split() == [
        "/etc/gpufleet/guard/stop.json"]
    assert sh(name, "stat -c %a:%U /etc/gpufleet/guard/stop.json").stdout.strip() == "600:root"

    # The maintenance two days ahead: read through ECS, reported, not acted on.
    wait_for(lambda: maintenance_scheduled(name, "aliyun", "SystemMaintenance.Reboot"), "the maintenance read", 60)
    assert emulator.count("DescribeInstanceHistoryEvents") >= 1

    # A restarted daemon reads its state: the event is done, nothing is
    # called again, though the spend is still past the cap (it reads the
    # maintenance again, which changes nothing).
    calls = len([c for c in emulator.calls if c["action"] != "DescribeInstanceHistoryEvents"])
    before = sh(name, f"stat -c %Y {GUARD_METRICS}").stdout.strip()
    sh(name, "systemctl restart gpufleet-guard")
    wait_for(lambda: sh(name, f"stat -c %Y {GUARD_METRICS}").stdout.strip() > before,
             "the restarted guard's first poll", 60)
    assert 'gpufleet_guard_budget_state{state="cap"} 1' in metrics(name)
    assert 'gpufleet_guard_final_action_ok{reason="budget",action="stop"} 1' in metrics(name)
    assert len([c for c in emulator.calls if c["action"] != "DescribeInstanceHistoryEvents"]) == calls
    assert len(emulator.stops) == 1

    # The role again changes nothing, and neither does check mode.
    rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(lab, "aliyun", **settings))
    assert rc == 0 and stats.get("changed") == 0, out[-4000:]
    rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(lab, "aliyun", **settings), "--check")
    assert rc == 0 and stats.get("changed") == 0, out[-4000:]


def test_tencent_no_metadata_fault_is_a_notice_and_the_notice_stops_the_instance_once(lab):
    name, apis, instances = lab
    emulator, inst = apis["tencent"], instances["tencent"]
    converge(lab, "tencent")
    wait_for(lambda: spot_state(name, "tencent", "clear"), "the guard's first poll", 60)
    wait_for(lambda: maintenance_scheduled(name, "tencent", "repair-task-107"), "the repair task read", 60)

    # Each fault of the metadata service is unknown, never a notice.
    for fault in ("500", "garbage", "drop", "hang"):
        sh(name, f"echo {fault} > /run/gft-fault-tencent")
        wait_for(lambda: spot_state(name, "tencent", "unknown"), f"the guard reading the service's {fault}", 60)
        sh(name, "rm /run/gft-fault-tencent")
        wait_for(lambda: spot_state(name, "tencent", "clear"), f"the service back after {fault}", 60)
    assert sh(name, f"test -e {MARKER}", check=False).returncode != 0
    assert emulator.count("StopInstances") == 0 and inst["state"] == "running"

    # Tencent writes the time in UTC+8 and says no zone.
    deadline = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(minutes=2)
    local = deadline.astimezone(datetime.timezone(datetime.timedelta(hours=8))).strftime("%Y-%m-%d %H:%M:%S")
    sh(name, f"printf '%s' '{local}' > /run/gft-notice-tencent")
    wait_for(lambda: emulator.stops, "the guard's stop call", 60)
    assert emulator.stops == [{"instance_id": inst["instance_id"], "stopped_mode": "STOP_CHARGING",
                               "stop_type": "SOFT_FIRST"}]
    wait_for(lambda: finished(name), "the guard's record of its final action", 30)
    event = the_event(name)
    marker = json.loads(sh(name, f"cat {MARKER}").stdout)
    assert event["reason"] == marker["reason"] == "spot"
    assert marker["deadline"] == deadline.timestamp(), (marker, deadline)
    assert emulator.count("StopInstances") == 1


def test_aws_the_spot_notice_stops_the_instance_once_through_ec2(lab):
    name, apis, instances = lab
    emulator, inst = apis["aws"], instances["aws"]
    converge(lab, "aws")
    wait_for(lambda: spot_state(name, "aws", "clear"), "the guard's first poll", 60)
    deadline = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=2)
    notice = json.dumps({"action": "terminate", "time": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")})
    sh(name, f"printf '%s' '{notice}' > /run/gft-notice-aws")
    wait_for(lambda: finished(name), "the guard's final action", 90)
    assert the_event(name)["final"]["ok"] is True, the_event(name)
    assert emulator.count("StopInstances") == 1
    state = emulator.ec2(REGIONS["aws"]).describe_instances(InstanceIds=[inst["instance_id"]])
    assert state["Reservations"][0]["Instances"][0]["State"]["Name"] in ("stopping", "stopped")


def test_huawei_says_it_has_no_notice_and_idle_gpus_stop_the_instance_once(lab):
    name, apis, instances = lab
    emulator, inst = apis["huawei"], instances["huawei"]
    # A stand-in nvidia-smi that prints what /run/gft-gpu-util holds, and
    # fails while that file is missing.
    sh(name, "printf '#!/bin/sh\\nexec cat /run/gft-gpu-util\\n' > /usr/local/bin/gft-nvidia-smi"
             " && chmod 0755 /usr/local/bin/gft-nvidia-smi && printf '[N/A]\\n0\\n' > /run/gft-gpu-util")
    converge(lab, "huawei", guard_idle_enabled=True, guard_idle_grace_minutes=0, guard_idle_window_minutes=1,
             guard_idle_threshold_percent=10, guard_nvidia_smi_path="/usr/local/bin/gft-nvidia-smi")
    wait_for(lambda: spot_state(name, "huawei", "unsupported"), "the guard's first poll", 60)
    wait_for(lambda: maintenance_scheduled(name, "huawei", "instance-reboot"), "the scheduled event read", 60)

    # One GPU that cannot be read keeps the node busy: idle time stays 0
    # poll after poll (each poll writes the metrics file anew).
    polls = {}

    def poll():
        when, _newline, text = sh(name, f"stat -c %.9Y {GUARD_METRICS} && cat {GUARD_METRICS}").stdout.partition("\n")
        polls[when] = text
        return len(polls) >= 5

    wait_for(poll, "five polls", 60)
    assert all("\ngpufleet_guard_idle_seconds 0.0\n" in text for text in polls.values()), polls

    # Both GPUs below the threshold for the window (a minute): idle.
    sh(name, "printf '2\\n0\\n' > /run/gft-gpu-util")
    wait_for(lambda: emulator.stops, "the guard's stop call after a minute idle", 150)
    assert emulator.stops == [{"instance_id": inst["instance_id"], "type": "SOFT"}]
    wait_for(lambda: finished(name), "the guard's record of its final action", 30)
    assert the_event(name)["reason"] == "idle"
    assert emulator.count("BatchStopServers") == 1 and inst["state"] == "stopped"

    # Back to notify only, and no maintenance read through the API: the
    # access key leaves the node, and the maintenance says why it is not read.
    rc, out, _stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(
        lab, "huawei", guard_final_action="none", guard_stop_credentials={}))
    assert rc == 0, out[-4000:]
    assert sh(name, "test -e /etc/gpufleet/guard/stop.json", check=False).returncode != 0
    wait_for(lambda: 'gpufleet_guard_maintenance_state{cloud="huawei",state="not_read"} 1' in metrics(name),
             "the maintenance no longer read", 60)
