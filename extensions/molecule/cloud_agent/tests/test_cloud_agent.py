"""What the stand-in agents of prepare.yml look like after
gpufleet.cloud.cloud_agent: CloudWatch's (Debian 12) installed from the
pinned package, configured with GPU metrics, its configuration loaded by
its control program, running; Huawei Cloud Eye's (Debian 13) configured,
readable by root only, and restarted after its configuration changed."""

from __future__ import annotations

import json

import pytest
from conftest import assert_file, assert_package, assert_unit_running

CTL_LOG = "/var/log/gpufleet-test-cloudwatch-ctl.log"
CW_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/amazon-cloudwatch-agent.json"
CES_CONFIG = "/usr/local/telescope/conf/conf.json"


def agent(host) -> str:
    return "huawei_ces" if host.backend.hostname.endswith("debian13") else "cloudwatch"


def test_cloudwatch_from_the_pinned_package_with_gpu_metrics(host):
    if agent(host) != "cloudwatch":
        pytest.skip("the CloudWatch node only")
    assert assert_package(host, "amazon-cloudwatch-agent") == "1.300057.0-1gpufleettest"
    assert host.file("/var/cache/gpufleet/cloudwatch.deb").exists
    config = json.loads(assert_file(host, CW_CONFIG))
    assert config["metrics"]["namespace"] == "gpufleet-test"
    assert "utilization_gpu" in config["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert_unit_running(host, "amazon-cloudwatch-agent")


def test_cloudwatch_loaded_its_configuration_once(host):
    if agent(host) != "cloudwatch":
        pytest.skip("the CloudWatch node only")
    calls = host.file(CTL_LOG).content_string.splitlines()
    # Once, by the converge; the idempotence run changed nothing to load.
    assert calls == [f"-a fetch-config -m ec2 -s -c file:{CW_CONFIG}"]


def test_cloud_eye_configured_for_root_only_and_restarted_after(host):
    if agent(host) != "huawei_ces":
        pytest.skip("the Cloud Eye node only")
    config = json.loads(assert_file(host, CES_CONFIG, mode=0o600))
    assert config["RegionID"] == "cn-north-4"
    assert config["ProjectId"] == "0123456789abcdef0123456789abcdef"
    assert config["InstanceId"] == "11111111-2222-3333-4444-555555555555"
    assert (config["AccessKey"], config["SecretKey"]) == ("TESTACCESSKEY", "test-secret-key-not-real")
    assert_unit_running(host, "telescoped")
    # Restarted after the configuration was written: it runs what is in the file.
    written = int(host.check_output(f"stat -c %Y {CES_CONFIG}"))
    started = int(host.check_output(
        "date -d \"$(systemctl show -p ActiveEnterTimestamp --value telescoped)\" +%s"))
    assert started >= written
