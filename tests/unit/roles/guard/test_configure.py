"""What the guard role writes for the repair ladder and the scheduled
maintenance, rendered from its tasks (tasks/configure.yml, install.yml)
over its defaults and vars as Ansible renders them, and read back by the
node's own loaders: the daemon's repair settings (reboot call, breaker),
the fleet breaker's configuration (its place limit, endpoint and key), and
the maintenance call through the cloud's API with the SDK it needs."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from tests.unit.roles.preflight_checks import ROOT, _trusted, _yaml

from ..conftest import load_helper

breaker = load_helper("guard", "gpufleet_guard_breaker.py", "gpufleet_guard_breaker")
for _name in ("notice", "probes", "triggers", "actions", "maintenance", "repair"):
    load_helper("guard", f"gpufleet_guard_{_name}.py", f"gpufleet_guard_{_name}")
guard = load_helper("guard", "gpufleet_guard.py", "gpufleet_guard")

TASKS = yaml.safe_load((ROOT / "roles" / "guard" / "tasks" / "configure.yml").read_text())
NODES = [f"gpu-{n}" for n in range(12)]
REPAIR = {"guard_repair_classes": ["RESTART_APP", "RESTART_VM"], "backup_repository_bucket": "fleet-backups"}


def task(name: str) -> dict:
    return next(t for t in TASKS if t["name"] == name)


def render(value, **inputs):
    variables = {"inventory_hostname": "gpu-3", "groups": {"all": NODES, "a100": NODES[:3]},
                 **_yaml(ROOT / "roles" / "guard" / "defaults" / "main.yml"),
                 **_yaml(ROOT / "roles" / "guard" / "vars" / "main.yml"), **inputs}
    return Templar(loader=DataLoader(), variables=_trusted(variables)).template(_trusted(value))


def breaker_settings(**inputs) -> dict:
    settings = task("Write the fleet breaker's configuration")["vars"]["__guard_breaker_settings"]
    # As to_nice_json writes it, and the breaker reads it.
    return breaker.load_config(json.loads(json.dumps(render(settings, **inputs))))


def daemon_config(tmp_path, **inputs):
    """The daemon's whole configuration, as the role writes it and the
    daemon loads it."""
    program = task("Install the guard daemon and its configuration")["vars"]["_common_program_settings"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(render(program["content"], **inputs)))
    return guard.load_config(str(path))


def sdk_packages(**inputs) -> list:
    tasks = yaml.safe_load((ROOT / "roles" / "guard" / "tasks" / "install.yml").read_text())
    step = next(t for t in tasks if t["name"].startswith("Install the cloud's SDK"))
    if not render("{{ " + step["when"] + " }}", **inputs):
        return []
    return render(step["vars"]["_common_venv_packages"], **inputs)


def repair_settings(**inputs) -> dict:
    program = task("Install the guard daemon and its configuration")["vars"]["_common_program_settings"]
    return render(program["content"]["repair"], **inputs)


@pytest.mark.parametrize(("group", "share", "limit"), [("all", 0.2, 2), ("all", 0.5, 6), ("a100", 0.2, 1),
                                                       ("all", 1, 12)])
def test_the_breaker_gives_its_share_of_the_group_one_place_at_least(group, share, limit):
    settings = breaker_settings(**REPAIR, guard_repair_group=group, guard_repair_group_share=share)
    assert settings["limit"] == limit
    assert settings["key"] == f"gpufleet/breaker/{group}.json" and settings["node"] == "gpu-3"
    assert (settings["window_seconds"], settings["lease_seconds"]) == (3600, 10800)
    assert settings["bucket"] == "fleet-backups"


def test_the_breaker_uses_the_backups_store_and_key_unless_given_its_own():
    backups = {"backup_repository_endpoint": "oss-cn-hangzhou.aliyuncs.com", "backup_s3_region": "cn-hangzhou",
               "backup_s3_access_key_id": "AKIDbackup", "backup_s3_secret_access_key": "backup-secret"}
    settings = breaker_settings(**REPAIR, **backups)
    # A bare host is HTTPS, as the backups read it.
    assert settings["endpoint"] == "https://oss-cn-hangzhou.aliyuncs.com" and settings["region"] == "cn-hangzhou"
    assert settings["credentials"] == {"access_key_id": "AKIDbackup", "secret_access_key": "backup-secret"}
    own = {"access_key_id": "AKIDbreaker", "secret_access_key": "breaker-secret"}
    assert breaker_settings(**REPAIR, **backups, guard_repair_breaker_credentials=own)["credentials"] == own
    assert breaker_settings(**REPAIR, guard_repair_breaker_endpoint="http://10.0.2.2:18282")["endpoint"] == \
        "http://10.0.2.2:18282"
    # No key anywhere: the SDK's chain (an instance role).
    assert breaker_settings(**REPAIR)["credentials"] is None


def test_the_daemons_repair_settings_name_the_reboot_and_breaker_calls():
    instance = {"guard_cloud": "tencent", "guard_stop_instance_id": "ins-1a2b3c4d", "guard_stop_region": "ap-guangzhou"}
    settings = repair_settings(**REPAIR, **instance)
    assert settings["reboot_command"] == ["/opt/gpufleet/guard-sdk/bin/python3",
                                          "/usr/local/lib/gpufleet/guard/gpufleet_guard_stop.py",
                                          "/etc/gpufleet/guard/stop.json"]
    assert settings["breaker_command"][1:] == ["/usr/local/lib/gpufleet/guard/gpufleet_guard_breaker.py",
                                               "/etc/gpufleet/guard/breaker.json"]
    loaded = guard.load_repair(json.loads(json.dumps(settings)), "/usr/bin/nvidia-smi")
    assert loaded.classes == ("RESTART_APP", "RESTART_VM") and loaded.verify_seconds == 1800
    assert loaded.report_path == "/var/lib/gpufleet/health/report.json"
    # MTBI and MTTR are summed by the breaker's group.
    assert loaded.group == "all"
    assert guard.load_repair(json.loads(json.dumps(repair_settings(**REPAIR, guard_repair_group="a100"))),
                             "/usr/bin/nvidia-smi").group == "a100"
    # No instance known, or a stop command of the user's own: no reboot call.
    assert repair_settings(**REPAIR)["reboot_command"] == []
    assert repair_settings(**REPAIR, **instance, guard_stop_command=["/usr/local/bin/stop-me"])["reboot_command"] == []
    assert repair_settings(**REPAIR, guard_repair_breaker_command=["/usr/local/bin/b"])["breaker_command"] == [
        "/usr/local/bin/b"]
    # Off: the daemon reads no report.
    assert guard.load_repair(json.loads(json.dumps(repair_settings())), "/usr/bin/nvidia-smi") is None


KEYS = {"access_key_id": "AKIDgpufleet", "secret_access_key": "gpufleet-secret"}
INSTANCES = {"aliyun": ("i-bp1a2b3c4d", "cn-hangzhou", "alibabacloud-ecs20140526"),
             "tencent": ("ins-1a2b3c4d", "ap-guangzhou", "tencentcloud-sdk-python-cvm"),
             "huawei": ("5c1f8a52-0000-4000-8000-000000000000", "cn-north-4", "huaweicloudsdkecs")}


@pytest.mark.parametrize("cloud", sorted(INSTANCES))
def test_an_api_clouds_maintenance_is_read_through_the_instance_program_with_its_sdk(cloud, tmp_path):
    instance, region, package = INSTANCES[cloud]
    known = {"guard_cloud": cloud, "guard_stop_instance_id": instance, "guard_stop_region": region}
    for credentials in ({"guard_stop_credentials": KEYS}, {"guard_stop_uses_instance_role": True}):
        config = daemon_config(tmp_path, **known, **credentials)
        assert config.maintenance and config.maintenance_not_read == ""
        assert config.maintenance_command == ("/opt/gpufleet/guard-sdk/bin/python3",
                                              "/usr/local/lib/gpufleet/guard/gpufleet_guard_stop.py",
                                              "/etc/gpufleet/guard/stop.json")
        assert (config.maintenance_interval_seconds, config.maintenance_timeout_seconds) == (300, 120)
        assert any(p.startswith(package + "==") for p in sdk_packages(**known, **credentials))
    # Without credentials, or without the instance: not read, and why; no SDK.
    for missing in (known, {**known, "guard_stop_region": ""}):
        config = daemon_config(tmp_path, **missing, guard_stop_credentials={} if missing is known else KEYS)
        assert config.maintenance_command == () and sdk_packages(**missing) == []
        assert config.maintenance_not_read.startswith("not read: ")
        assert "guard_stop_instance_id, guard_stop_region" in config.maintenance_not_read
        assert "guard_stop_uses_instance_role, or guard_stop_credentials" in config.maintenance_not_read
    # Off: nothing read, nothing installed for it.
    config = daemon_config(tmp_path, **known, guard_stop_credentials=KEYS, guard_maintenance_enabled=False)
    assert not config.maintenance and config.maintenance_command == ()
    assert sdk_packages(**known, guard_stop_credentials=KEYS, guard_maintenance_enabled=False) == []


def test_aws_reads_its_maintenance_from_the_metadata_without_the_sdk(tmp_path):
    known = {"guard_cloud": "aws", "guard_stop_instance_id": "i-0123456789abcdef0", "guard_stop_region": "us-east-1",
             "guard_stop_credentials": KEYS}
    config = daemon_config(tmp_path, **known)
    assert config.maintenance and config.maintenance_command == () and config.maintenance_not_read == ""
    assert sdk_packages(**known) == []
