"""Bad inputs to gpufleet.cloud.cloud_agent fail before anything changes:
the run fails, the message names the bad variable, no task changed, no
package is fetched and no agent is configured; the Cloud Eye secret key
shows nowhere in the output."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

SECRET = "bad-input-secret-key-not-real"
SHA256 = "0" * 64

CASES = {
    "misspelt variable, strict": (
        {"cloud_agent_nmae": "cloudwatch", "gpufleet_strict_inputs": True},
        "cloud_agent_nmae",
        "did you mean cloud_agent_name?",
    ),
    "unknown agent": ({"cloud_agent_name": "datadog"}, "cloud_agent_name"),
    "CloudWatch without a pinned package": ({"cloud_agent_name": "cloudwatch"}, "cloud_agent_package_url"),
    "CloudWatch with a checksum that is not SHA-256": (
        {"cloud_agent_name": "cloudwatch", "cloud_agent_package_url": "https://mirror.example.com/agent.deb",
         "cloud_agent_package_sha256": "md5:0123"},
        "cloud_agent_package_sha256",
    ),
    "CloudWatch from a URL that is not one": (
        {"cloud_agent_name": "cloudwatch", "cloud_agent_package_url": "/srv/agent.deb",
         "cloud_agent_package_sha256": SHA256},
        "cloud_agent_package_url",
    ),
    "Cloud Eye without a region": (
        {"cloud_agent_name": "huawei_ces", "cloud_agent_huawei_ces_secret_key": SECRET},
        "cloud_agent_huawei_ces_region",
        "for example cn-north-4",
    ),
    "the old name, with an unknown agent": ({"monitoring_cloud_agent": "datadog"}, "cloud_agent_name"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.cloud_agent",
    CASES,
    files=["/var/cache/gpufleet/cloudwatch.deb", "/opt/aws", "/usr/local/telescope"],
    forbidden=[SECRET],
)
