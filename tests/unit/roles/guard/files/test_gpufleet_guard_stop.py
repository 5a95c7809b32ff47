"""The guard's stop call (gpufleet_guard_stop.py) through each cloud's
official SDK, against the cloud API emulators: the stop with each cloud's
no-charge mode, exactly once, and the fault matrix: throttling, the
cloud's server errors, time-outs, refused credentials, an unknown
instance, an instance already stopping or stopped, a hollow answer."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gpufleet.cloud.plugins.module_utils import _clouds
from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.support.ports import REFUSED_URL

from ...conftest import ROOT, load_helper

stopper = load_helper("guard", "gpufleet_guard_stop.py", "gpufleet_guard_stop")
notice = load_helper("guard", "gpufleet_guard_notice.py", "gpufleet_guard_notice")


def test_the_stop_and_the_notice_know_the_registrys_clouds_and_no_other():
    # On the node the registry is gpufleet_clouds.py, copied by the role.
    assert stopper.CLOUDS == _clouds.CLOUDS
    assert set(stopper.STOPPED) == set(_clouds.CLOUDS)
    assert set(notice.READERS) <= set(_clouds.CLOUDS)


# cloud -> (emulator, region, an instance type it knows, the stop call's
# action name as the emulator counts it, what the stop was asked for)
CLOUDS = {
    "aliyun": (AliyunEmulator, "cn-hangzhou", "ecs.gn7i-c8g1.2xlarge", "StopInstance",
               {"stopped_mode": "StopCharging", "force_stop": "False"}),
    "tencent": (TencentEmulator, "ap-guangzhou", "GN7.2XLARGE32", "StopInstances",
                {"stopped_mode": "STOP_CHARGING", "stop_type": "SOFT_FIRST"}),
    "huawei": (HuaweiEmulator, "cn-north-4", "pi2.2xlarge.4", "BatchStopServers", {"type": "SOFT"}),
    "aws": (AwsEmulator, "us-east-1", "g5.xlarge", "StopInstances", None),
}
KEYS = {"access_key_id": "AKIDgpufleettest", "secret_access_key": "gpufleet-test-secret"}


@pytest.fixture(params=sorted(CLOUDS))
def cloud(request):
    """(name, the running emulator, the seeded instance's id, a config)."""
    emulator_class, region, itype, _action, _mode = CLOUDS[request.param]
    with emulator_class() as emulator:
        (inst,) = emulator.seed([{"region": region, "instance_type": itype, "name": "gpu-1"}])
        emulator.seed([{"region": region, "instance_type": itype, "name": "gpu-2"}])
        config = {"cloud": request.param, "region": region, "instance_id": inst["instance_id"],
                  "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        yield request.param, emulator, inst, config


def states(emulator):
    return {i["name"]: state_of(emulator, i) for insts in emulator.instances.values() for i in insts}


def state_of(emulator, inst):
    if isinstance(emulator, AwsEmulator):
        reply = emulator.ec2(inst["region"]).describe_instances(InstanceIds=[inst["instance_id"]])
        return reply["Reservations"][0]["Instances"][0]["State"]["Name"]
    return inst["state"]


def run(config, tmp_path, capsys):
    path = tmp_path / "stop.json"
    path.write_text(json.dumps(config))
    code = stopper.main([str(path)])
    return code, json.loads(capsys.readouterr().out)


def test_stops_the_instance_once_with_the_clouds_no_charge_mode(cloud, tmp_path, capsys):
    name, emulator, inst, config = cloud
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"], report["stop_called"]) == (0, "stopped", True), report
    assert states(emulator) == {"gpu-1": "stopped", "gpu-2": "running"}
    assert emulator.count(CLOUDS[name][3]) == 1
    mode = CLOUDS[name][4]
    if mode is not None:
        assert emulator.stops == [dict(mode, instance_id=inst["instance_id"])]

    # Run again (the daemon restarted, or the answer was lost): the state
    # is read, and no second stop is sent.
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"], report["stop_called"]) == (0, "already stopped", False), report
    assert emulator.count(CLOUDS[name][3]) == 1


def test_throttling_and_server_errors_say_try_again_and_stop_nothing(cloud, tmp_path, capsys):
    name, emulator, _inst, config = cloud
    emulator.faults.throttle(1, action=CLOUDS[name][3])
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    assert states(emulator)["gpu-1"] == "running"
    # The retry the guard makes then goes through, once.
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (0, "stopped"), report

    emulator.faults.failed_regions.add(config["region"])
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report


def test_a_cloud_that_does_not_answer_in_time_says_try_again(cloud, tmp_path, capsys):
    _name, emulator, _inst, config = cloud
    emulator.faults.latency = 3
    code, report = run(dict(config, timeout=1), tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report


def test_nothing_listening_says_try_again(cloud, tmp_path, capsys):
    _name, emulator, _inst, config = cloud
    emulator.stop()
    code, report = run(dict(config, endpoint=REFUSED_URL), tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report


@pytest.mark.parametrize("kind", ["unknown_key", "bad_signature"])
def test_refused_credentials_are_final_and_named(cloud, kind, tmp_path, capsys):
    _name, emulator, _inst, config = cloud
    emulator.faults.rejected_credentials = kind
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused"), report
    assert report["detail"]


def test_an_instance_the_cloud_does_not_know_is_refused_not_retried(cloud, tmp_path, capsys):
    name, emulator, _inst, config = cloud
    missing = {"aws": "i-0123456789abcdef0", "huawei": "5c1f8a52-0000-4000-8000-000000000000"}.get(name, "i-missing")
    code, report = run(dict(config, instance_id=missing), tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused"), report
    assert emulator.stops == []


def test_an_instance_listed_without_its_state_is_unknown_and_not_stopped():
    class NoState:
        ALREADY = ()
        stopped = False

        def state(self):
            return None

        def stop(self):
            self.stopped = True

    adapter = NoState()
    config = {"cloud": "aliyun", "region": "cn-hangzhou", "instance_id": "i-1"}
    with pytest.raises(stopper.StopError, match="without its state") as raised:
        stopper.stop(config, adapter)
    assert raised.value.retry is True and adapter.stopped is False


def test_an_instance_stopped_between_the_read_and_the_call_is_already_stopped():
    # The cloud refuses the stop for the instance's state; the stopper
    # reads the state again instead of failing or trying forever.
    with TencentEmulator() as emulator:
        (inst,) = emulator.seed([{"region": "ap-guangzhou", "instance_type": "GN7.2XLARGE32"}])
        config = {"cloud": "tencent", "region": "ap-guangzhou", "instance_id": inst["instance_id"],
                  "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        adapter = stopper.Tencent(stopper.load_config(config))
        real_stop = adapter.stop

        def stopped_by_someone_else():
            inst["state"] = "stopped"
            real_stop()

        adapter.stop = stopped_by_someone_else
        report = stopper.stop(config, adapter)
        assert report["outcome"] == "already stopped" and report["stop_called"] is True, report
        assert emulator.stops == []


def test_a_state_refusal_for_an_instance_still_running_is_retried(tmp_path, capsys):
    with AliyunEmulator() as emulator:
        (inst,) = emulator.seed([{"region": "cn-hangzhou", "instance_type": "ecs.gn7i-c8g1.2xlarge",
                                  "state": "pending"}])
        config = {"cloud": "aliyun", "region": "cn-hangzhou", "instance_id": inst["instance_id"],
                  "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        code, report = run(config, tmp_path, capsys)
        assert (code, report["outcome"]) == (1, "retry"), report
        assert "Pending, not stopping" in report["detail"]


@pytest.mark.parametrize("action", ["stop", "reboot"])
@pytest.mark.parametrize("name", ["aliyun", "tencent", "huawei"])
def test_an_answer_without_the_instance_is_unknown_not_stopped_nor_missing(name, action, tmp_path, capsys):
    # A hollow 200 (a proxy, a gateway) says nothing of the state: another
    # try, never "stopped", never "no such instance", and no reboot.
    emulator_class, region, itype, stop_call, _mode = CLOUDS[name]
    with emulator_class() as emulator:
        (inst,) = emulator.seed([{"region": region, "instance_type": itype}])
        emulator.faults.hollow.add((region, {"huawei": "ShowServer"}.get(name, "DescribeInstances")))
        config = {"cloud": name, "region": region, "instance_id": inst["instance_id"],
                  "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        code, report = run_action(config, action, tmp_path, capsys)
        assert (code, report["outcome"]) == (1, "retry"), report
        assert emulator.count(stop_call) == 0 and emulator.count(REBOOTS[name][0]) == 0
        assert inst["state"] == "running"


@pytest.mark.parametrize(("change", "message"), [
    ({"cloud": "gcp"}, "cloud must be aliyun, tencent, huawei or aws, not 'gcp'"),
    ({"instance_id": ""}, "instance_id is empty"),
    ({"region": None}, "region is empty"),
    ({"credentials": {"access_key_id": "AKID"}}, "credentials need access_key_id and secret_access_key"),
])
def test_a_bad_configuration_is_refused_by_name(tmp_path, capsys, change, message):
    config = {"cloud": "aws", "region": "us-east-1", "instance_id": "i-1", "credentials": dict(KEYS), **change}
    code, report = run(config, tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused") and message in report["detail"], report


def test_an_unreadable_configuration_is_refused(tmp_path, capsys):
    code = stopper.main([str(tmp_path / "missing.json")])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["outcome"]) == (2, "refused") and "missing.json" in report["detail"]


def test_the_node_sdk_pins_are_the_tested_versions():
    # The role installs each cloud's SDK at the version this suite runs.
    wanted = yaml.safe_load((ROOT / "roles" / "guard" / "vars" / "main.yml").read_text())["__guard_stop_sdk_packages"]
    assert sorted(wanted) == sorted(stopper.CLOUDS)
    pins = dict(line.split("==") for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pins = {name.lower().replace("_", "-"): version for name, version in pins.items()}
    for requirement in (r for packages in wanted.values() for r in packages):
        name, version = requirement.split("==")
        assert pins.get(name.lower().replace("_", "-")) == version, requirement


# The repair ladder's reboot: cloud -> (the reboot call's action name as
# the emulator counts it, what the reboot was asked for; None where the
# emulator is moto, which records no parameters).
REBOOTS = {
    "aliyun": ("RebootInstance", {"force_stop": "False"}),
    "tencent": ("RebootInstances", {"stop_type": "SOFT_FIRST"}),
    "huawei": ("BatchRebootServers", {"type": "SOFT"}),
    "aws": ("RebootInstances", None),
}


def test_reboots_the_running_instance_with_the_clouds_soft_mode(cloud, tmp_path, capsys):
    name, emulator, inst, config = cloud
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"], report["reboot_called"], report["action"]) == (0, "rebooted", True, "reboot")
    action, mode = REBOOTS[name]
    assert emulator.count(action) == 1
    if mode is not None:
        assert emulator.reboots == [dict(mode, instance_id=inst["instance_id"])]
    # A reboot stops nothing, and the other instance is left alone.
    assert states(emulator) == {"gpu-1": "running", "gpu-2": "running"}
    assert emulator.count(CLOUDS[name][3]) == 0


def test_a_throttled_or_failing_reboot_says_try_again(cloud, tmp_path, capsys):
    name, emulator, _inst, config = cloud
    action = REBOOTS[name][0]
    emulator.faults.throttle(1, action=action)
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    assert emulator.reboots == []
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (0, "rebooted"), report

    # Throttled on the state read: no reboot is called on an unread state.
    emulator.faults.throttle(1)
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    assert emulator.count(action) == 2

    emulator.faults.failed_regions.add(config["region"])
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report


def test_a_reboot_that_does_not_answer_in_time_or_reaches_nothing_says_try_again(cloud, tmp_path, capsys):
    _name, emulator, _inst, config = cloud
    emulator.faults.latency = 3
    code, report = run_action(dict(config, timeout=1), "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report
    code, report = run_action(dict(config, endpoint=REFUSED_URL), "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (1, "retry"), report


def test_a_reboot_with_refused_credentials_or_an_unknown_instance_is_final(cloud, tmp_path, capsys):
    name, emulator, _inst, config = cloud
    missing = {"aws": "i-0123456789abcdef0", "huawei": "5c1f8a52-0000-4000-8000-000000000000"}.get(name, "i-missing")
    code, report = run_action(dict(config, instance_id=missing), "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused"), report
    emulator.faults.rejected_credentials = "unknown_key"
    code, report = run_action(config, "reboot", tmp_path, capsys)
    assert (code, report["outcome"]) == (2, "refused") and report["detail"], report
    assert emulator.count(REBOOTS[name][0]) == 0


@pytest.mark.parametrize("name", ["aliyun", "tencent", "huawei"])
def test_a_stopped_instance_is_not_rebooted_and_one_rebooting_is_left_to_it(name, tmp_path, capsys):
    emulator_class, region, itype, _action, _mode = CLOUDS[name]
    with emulator_class() as emulator:
        stopped, rebooting = emulator.seed([
            {"region": region, "instance_type": itype, "state": "stopped"},
            {"region": region, "instance_type": itype, "state": "starting" if name == "aliyun" else "rebooting"}])
        config = {"cloud": name, "region": region, "endpoint": emulator.url, "credentials": dict(KEYS), "timeout": 5}
        code, report = run_action(dict(config, instance_id=stopped["instance_id"]), "reboot", tmp_path, capsys)
        # A reboot starts no stopped instance: refused, and not tried again.
        assert (code, report["outcome"]) == (2, "refused"), report
        assert "a reboot needs it" in report["detail"]
        code, report = run_action(dict(config, instance_id=rebooting["instance_id"]), "reboot", tmp_path, capsys)
        assert (code, report["outcome"], report["reboot_called"]) == (0, "already rebooting", False), report
        assert emulator.count(REBOOTS[name][0]) == 0 and emulator.reboots == []


def test_an_instance_listed_without_its_state_is_not_rebooted():
    class NoState:
        rebooted = False

        def state(self):
            return ""

        def reboot(self):
            self.rebooted = True

    adapter = NoState()
    with pytest.raises(stopper.StopError, match="without its state") as raised:
        stopper.reboot({"cloud": "aws", "region": "us-east-1", "instance_id": "i-1"}, adapter)
    assert raised.value.retry is True and adapter.rebooted is False


@pytest.mark.parametrize("argv", [["reset"], ["reboot", "now"], []])
def test_an_unknown_action_or_argument_is_refused_with_the_usage(argv, tmp_path, capsys):
    path = tmp_path / "stop.json"
    path.write_text(json.dumps({"cloud": "aws", "region": "us-east-1", "instance_id": "i-1"}))
    code = stopper.main([str(path), *argv] if argv else [])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["outcome"]) == (2, "refused") and "[stop|reboot|events]" in report["detail"], report


def run_action(config, action, tmp_path, capsys):
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(config))
    code = stopper.main([str(path), action])
    return code, json.loads(capsys.readouterr().out)
