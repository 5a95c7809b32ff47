"""gpu_instance_info: the same records as the inventory plugins, from a task."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_record import RECORD_KEYS
from ansible_collections.gpufleet.cloud.plugins.modules import gpu_instance_info
from tests.unit.plugins.conftest import CLOUDS

# The module's credential options, per cloud, as a user would write them.
MODULE_CREDENTIALS = {cloud: dict(zip(("access_key", "secret_key"), spec["credentials"].values()))
                      for cloud, spec in CLOUDS.items()}


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        gpu_instance_info.main()
    captured = capsys.readouterr()
    output = json.loads(captured.out)
    # Outside a real task run, ansible-core shows module warnings on stderr
    # instead of returning them; gather them where a test can see them.
    output.setdefault("warnings", [])
    output["warnings"].extend(line for line in captured.err.splitlines() if "WARNING" in line)
    return exit_info.value.code, output


def module_args(cloud, emulator, **extra):
    args = {"provider": cloud, "endpoint": emulator.url, "regions": CLOUDS[cloud]["regions"]}
    args.update(MODULE_CREDENTIALS[cloud])
    if CLOUDS[cloud].get("iam"):
        args["iam_endpoint"] = emulator.url
    args.update(extra)
    return args


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_records_match_the_inventory_record_model(cloud, start_emulator, capsys):
    emulator = start_emulator(cloud, count=10, stopped_share=0.0)
    code, result = run_module(module_args(cloud, emulator, gpu_only=False), capsys)
    assert code == 0 and result["changed"] is False and result["failed_regions"] == []
    assert len(result["instances"]) == 10
    assert all(tuple(r) == RECORD_KEYS and r["provider"] == cloud for r in result["instances"])
    assert sorted(result["regions"]) == sorted(CLOUDS[cloud]["regions"])


def test_filters_and_gpu_only(start_emulator, capsys):
    emulator = start_emulator("tencent")
    emulator.seed([
        {"region": "ap-guangzhou", "instance_type": "GN7.2XLARGE32", "tags": {"team": "ml"}},
        {"region": "ap-guangzhou", "instance_type": "GN7.2XLARGE32", "tags": {"team": "infra"}, "state": "stopped"},
        {"region": "ap-shanghai", "instance_type": "S5.LARGE8", "tags": {"team": "ml"}},
    ])
    _code, result = run_module(module_args("tencent", emulator, filters={"tags": {"team": "ml"}}), capsys)
    assert [r["instance_type"] for r in result["instances"]] == ["GN7.2XLARGE32"]
    _code, result = run_module(module_args("tencent", emulator, filters={"state": ["stopped"]}), capsys)
    assert [r["tags"]["team"] for r in result["instances"]] == ["infra"]


def test_a_failed_region_is_reported_or_fails_with_strict_regions(start_emulator, capsys):
    emulator = start_emulator("huawei", count=6)
    emulator.faults.failed_regions.add("ap-southeast-1")
    code, result = run_module(module_args("huawei", emulator), capsys)
    assert code == 0
    assert [f["region"] for f in result["failed_regions"]] == ["ap-southeast-1"]
    assert any("region ap-southeast-1 failed" in w for w in result["warnings"])
    assert {r["region"] for r in result["instances"]} == {"cn-north-4"}

    code, result = run_module(module_args("huawei", emulator, strict_regions=True), capsys)
    assert code == 1 and "region ap-southeast-1 failed" in result["msg"] and "strict_regions" in result["msg"]


def test_secrets_never_appear_in_the_result(start_emulator, capsys):
    emulator = start_emulator("aliyun", count=2)
    emulator.faults.failed_regions.add("cn-beijing")
    _code, result = run_module(module_args("aliyun", emulator), capsys)
    text = json.dumps(result)
    assert MODULE_CREDENTIALS["aliyun"]["secret_key"] not in text
    assert MODULE_CREDENTIALS["aliyun"]["access_key"] not in text


@pytest.mark.parametrize("args, message", [
    ({"regions": ["cn_hangzhou"]}, "option 'regions'"),
    ({"secret_key": None}, "option 'secret_key': access_key_id and access_key_secret must be set together"),
    ({"workers": 0}, "option 'workers': must be at least 1"),
    ({"profile": "prod"}, "option 'profile': only for provider aws"),
    ({"filters": {"state": ["up"]}}, "filters"),
    ({"timeout": "soon"}, "timeout"),
    ({"colour": "red"}, "Unsupported parameters"),
])
def test_bad_arguments_name_the_option(start_emulator, capsys, args, message):
    emulator = start_emulator("aliyun")
    code, result = run_module(module_args("aliyun", emulator, **args), capsys)
    assert code == 1 and message in result["msg"]


def test_missing_credentials_fail_with_what_to_set(capsys):
    code, result = run_module({"provider": "tencent", "regions": ["ap-guangzhou"]}, capsys)
    assert code == 1 and "no Tencent Cloud credentials" in result["msg"]


def test_a_type_the_region_does_not_offer_keeps_its_instance_as_unknown(start_emulator, capsys):
    emulator = start_emulator("aws")
    emulator.seed([{"region": "us-east-1", "instance_type": "p5.48xlarge", "name": "h100"},
                   {"region": "us-east-1", "instance_type": "p3dn.24xlarge", "name": "v100"},
                   {"region": "us-east-1", "instance_type": "g5g.xlarge", "name": "t4g"}])
    emulator.faults.unoffered_types["us-east-1"] = {"p3dn.24xlarge", "g5g.xlarge"}
    code, result = run_module(module_args("aws", emulator), capsys)
    assert code == 0 and result["failed_regions"] == []
    by_name = {r["name"]: r for r in result["instances"]}
    assert by_name["h100"]["gpu"]["count"] == 8 and by_name["h100"]["gpu_source"] == "api"
    # The built-in catalogue lists p3dn.24xlarge; nothing lists g5g.xlarge.
    assert by_name["v100"]["gpu"] == {"model": "V100", "count": 8, "memory_mib": 32768}
    assert by_name["v100"]["gpu_source"] == "catalogue"
    assert by_name["t4g"]["gpu"] == {"model": None, "count": None, "memory_mib": None}
    assert by_name["t4g"]["gpu_source"] == "unknown"
    assert any("p3dn.24xlarge" in w for w in result["warnings"])

    code, result = run_module(module_args("aws", emulator, gpu_unknown=False), capsys)
    assert sorted(r["name"] for r in result["instances"]) == ["h100", "v100"]
    assert any("is left out: its GPU data is unknown" in w for w in result["warnings"])
