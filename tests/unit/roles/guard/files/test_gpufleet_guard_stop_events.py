"""The instance program's ``events`` (gpufleet_guard_stop.py CONFIG
events): the maintenance Alibaba, Tencent and Huawei schedule for the
instance, through each cloud's official SDK against its emulator, read by
the guard's maintenance module (gpufleet_guard_maintenance.api_reading) as
the daemon reads it. Each cloud's events are written as its API reference
shows them. The fault matrix: throttling and server errors, a time-out,
nothing listening, refused credentials, a hollow answer, a count that
lies, several pages, the other instance's events, events that ended."""

from __future__ import annotations

import datetime
import json

import pytest

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.support.ports import REFUSED_URL

from ...conftest import load_helper

stopper = load_helper("guard", "gpufleet_guard_stop.py", "gpufleet_guard_stop")
# Loaded first: the maintenance module imports it by its name on the node.
notice = load_helper("guard", "gpufleet_guard_notice.py", "gpufleet_guard_notice")
maintenance = load_helper("guard", "gpufleet_guard_maintenance.py", "gpufleet_guard_maintenance")

START = datetime.datetime(2026, 12, 9, 9, 0, 43, tzinfo=datetime.timezone.utc).timestamp()
KEYS = {"access_key_id": "AKIDgpufleettest", "secret_access_key": "gpufleet-test-secret"}


def aliyun_event(event_id="e-uf64yvznlao4jl2c0001", code="SystemMaintenance.Reboot", state="Scheduled", **changes):
    # DescribeInstanceHistoryEvents' InstanceSystemEventType.
    body = {"EventId": event_id, "EventType": {"Code": 1, "Name": code},
            "EventCycleStatus": {"Code": 24, "Name": state}, "NotBefore": "2026-12-09T09:00:43Z",
            "EventPublishTime": "2026-12-07T06:32:31Z", "ImpactLevel": "100", "ResourceType": "instance",
            "Reason": "host hardware maintenance"}
    body.update(changes)
    return body


def tencent_task(task_id="rep-0a1b2c3d", kind=107, status=4, **changes):
    # DescribeTaskInfo's RepairTaskInfo; CVM's times are UTC+8 with no zone.
    body = {"TaskId": task_id, "Alias": "gpu-1", "TaskTypeId": kind, "TaskTypeName": "instance maintenance upgrade",
            "TaskStatus": status, "DeviceStatus": 1, "OperateStatus": 1, "CreateTime": "2026-12-07 10:00:00",
            "AuthTime": "2026-12-09 17:00:43", "EndTime": "", "TaskDetail": "", "Product": "CVM",
            "AuthType": "Waiting_auth", "AuthSource": ""}
    body.update(changes)
    return body


def huawei_event(event_id="0ead944a-72e8-494f-89ba-5846fb7ac5c0", kind="instance-redeploy", state="scheduled",
                 **changes):
    # ListScheduledEvents' events, as its response example writes one.
    body = {"id": event_id, "type": kind, "state": state, "publish_time": "2026-12-07T12:55:36Z",
            "start_time": None, "finish_time": None, "not_before": "2026-12-09T09:00:43Z",
            "not_after": "2026-12-09T11:00:43Z", "not_before_deadline": "2026-12-09T09:00:43Z",
            "description": "{\"en-us\":\"ECSs will be redeployed on new hosts\"}"}
    body.update(changes)
    return body


# cloud -> (emulator, region, instance type, the events call, a scheduled
# event, one that ended, the code the guard reads)
CLOUDS = {
    "aliyun": (AliyunEmulator, "cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", "DescribeInstanceHistoryEvents",
               aliyun_event, {"state": "Executed"}, "SystemMaintenance.Reboot"),
    "tencent": (TencentEmulator, "ap-guangzhou", "GN7.2XLARGE32", "DescribeTaskInfo",
                tencent_task, {"status": 3}, "repair-task-107"),
    "huawei": (HuaweiEmulator, "cn-north-4", "pi2.2xlarge.4", "ListScheduledEvents",
               huawei_event, {"state": "completed"}, "instance-redeploy"),
}


@pytest.fixture(params=sorted(CLOUDS))
def cloud(request):
    """(name, the running emulator, the node's instance, the other one, a config)."""
    emulator_class, region, itype = CLOUDS[request.param][:3]
    with emulator_class() as emulator:
        (inst,) = emulator.seed([{"region": region, "instance_type": itype, "name": "gpu-1"}])
        (other,) = emulator.seed([{"region": region, "instance_type": itype, "name": "gpu-2"}])
        config = {"cloud": request.param, "region": region, "instance_id": inst["instance_id"],
                  "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        yield request.param, emulator, inst, other, config


def make(name, inst, event_id=None, ended=False, **changes):
    """One of the cloud's events for ``inst``, in the cloud's own words."""
    factory, end = CLOUDS[name][4], CLOUDS[name][5]
    kwargs = dict(end) if ended else {}
    if event_id:
        kwargs["task_id" if name == "tencent" else "event_id"] = event_id
    body = factory(**kwargs, **changes)
    body["InstanceId" if name != "huawei" else "instance_id"] = inst["instance_id"]
    return body


def run(config, tmp_path, capsys):
    """The program's exit status, its report, and the guard's reading of both."""
    path = tmp_path / "stop.json"
    path.write_text(json.dumps(config))
    code = stopper.main([str(path), "events"])
    out = capsys.readouterr().out
    return code, json.loads(out), maintenance.api_reading(config["cloud"], code, out, "")


def test_the_scheduled_event_is_read_with_its_window_and_nothing_else(cloud, tmp_path, capsys):
    name, emulator, inst, other, config = cloud
    emulator.schedule_event(inst, make(name, inst))
    emulator.schedule_event(inst, make(name, inst, event_id="ended-1", ended=True))
    emulator.schedule_event(other, make(name, other, event_id="other-1"))
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"], report["count"]) == (0, "read", 1), report
    assert reading.state == maintenance.SCHEDULED and reading.problems == ()
    (window,) = reading.windows
    assert (window.code, window.not_before) == (CLOUDS[name][6], START)
    assert emulator.count(CLOUDS[name][3]) == 1
    # Read only: nothing stopped or rebooted.
    assert emulator.stops == [] and emulator.reboots == []


def test_no_event_is_clear(cloud, tmp_path, capsys):
    name, emulator, inst, _other, config = cloud
    emulator.schedule_event(inst, make(name, inst, ended=True))
    code, _report, reading = run(config, tmp_path, capsys)
    assert code == 0 and reading.state == maintenance.CLEAR


def test_every_page_is_read(cloud, tmp_path, capsys):
    name, emulator, inst, _other, config = cloud
    for index in range(230):
        emulator.schedule_event(inst, make(name, inst, event_id=f"ev-{index:03d}"))
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["count"]) == (0, 230), report
    assert sorted(w.event_id for w in reading.windows) == [f"ev-{i:03d}" for i in range(230)]
    assert emulator.count(CLOUDS[name][3]) == 3


@pytest.mark.parametrize("cloud", ["aliyun", "tencent"], indirect=True)
def test_a_count_above_what_the_pages_hold_is_unknown_not_fewer_events(cloud, tmp_path, capsys):
    name, emulator, inst, _other, config = cloud
    emulator.schedule_event(inst, make(name, inst))
    emulator.faults.total_skew[config["region"]] = 1
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    assert "TotalCount 2, but the pages held 1" in report["detail"]
    assert reading.state == maintenance.UNKNOWN and reading.windows == ()


def test_throttling_and_server_errors_are_unknown_and_say_try_again(cloud, tmp_path, capsys):
    name, emulator, inst, _other, config = cloud
    emulator.schedule_event(inst, make(name, inst))
    emulator.faults.throttle(1, action=CLOUDS[name][3])
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    assert reading.state == maintenance.UNKNOWN and "exited 1" in reading.detail
    code, _report, reading = run(config, tmp_path, capsys)
    assert code == 0 and reading.state == maintenance.SCHEDULED

    emulator.faults.failed_regions.add(config["region"])
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"], reading.state) == (1, "retry", maintenance.UNKNOWN), report


def test_a_cloud_that_does_not_answer_in_time_is_unknown(cloud, tmp_path, capsys):
    _name, emulator, _inst, _other, config = cloud
    emulator.faults.latency = 3
    code, report, reading = run(dict(config, timeout=1), tmp_path, capsys)
    assert (code, report["outcome"], reading.state) == (1, "retry", maintenance.UNKNOWN), report


def test_nothing_listening_is_unknown(cloud, tmp_path, capsys):
    _name, emulator, _inst, _other, config = cloud
    emulator.stop()
    code, report, reading = run(dict(config, endpoint=REFUSED_URL), tmp_path, capsys)
    assert (code, report["outcome"], reading.state) == (1, "retry", maintenance.UNKNOWN), report


def test_refused_credentials_are_unknown_and_final(cloud, tmp_path, capsys):
    _name, emulator, _inst, _other, config = cloud
    emulator.faults.rejected_credentials = "unknown_key"
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"], reading.state) == (2, "refused", maintenance.UNKNOWN), report


def test_a_hollow_answer_is_unknown_never_clear(cloud, tmp_path, capsys):
    name, emulator, inst, _other, config = cloud
    emulator.schedule_event(inst, make(name, inst))
    emulator.faults.hollow.add((config["region"], CLOUDS[name][3]))
    code, report, reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"], reading.state) == (1, "retry", maintenance.UNKNOWN), report


def test_aws_reads_its_events_from_the_metadata_not_here(tmp_path, capsys):
    config = {"cloud": "aws", "region": "us-east-1", "instance_id": "i-0123456789abcdef0", "credentials": KEYS}
    code, report, _reading = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused") and "metadata" in report["detail"]
