"""Bad inputs to gpufleet.cloud.pull fail before anything changes (see
tests/integration/roles/bad_input.py for what is checked: the run fails, the
message names the variable and the reason, no task changed, and neither git
nor the pull script, its configuration, units or venv are on the node)."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

GOOD = {"pull_repo_url": "https://git.example.com/fleet/gpufleet.git"}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        dict(GOOD, pull_repo="https://git.example.com/x.git", gpufleet_strict_inputs=True),
        "pull_repo",
        "did you mean pull_repo_url?",
    ),
    "no repository": ({}, "pull_repo_url", "missing required arguments"),
    "not a git URL": ({"pull_repo_url": "fleet repository"}, "pull_repo_url", "is not a git URL"),
    "plain http": ({"pull_repo_url": "http://git.example.com/fleet.git"}, "pull_repo_url", "is not a git URL"),
    "token in the URL": (
        {"pull_repo_url": "https://ci:glpat-123@git.example.com/fleet.git"},
        "pull_repo_url",
        "a password or token in the URL",
    ),
    "argument in the branch": (
        dict(GOOD, pull_branch="--upload-pack=touch /tmp/x"),
        "pull_branch",
        "must be a git branch",
    ),
    "playbook outside the repository": (
        dict(GOOD, pull_playbook="../../etc/site.yml"),
        "pull_playbook",
        "without '..'",
    ),
    "zero interval": (dict(GOOD, pull_interval_minutes=0), "pull_interval_minutes", "positive number of minutes"),
    "negative interval": (
        dict(GOOD, pull_interval_minutes=-15),
        "pull_interval_minutes",
        "positive number of minutes (got -15)",
    ),
    "interval not a number": (dict(GOOD, pull_interval_minutes="hourly"), "pull_interval_minutes", "int"),
    "relative checkout directory": (dict(GOOD, pull_directory="pull/checkout"), "pull_directory", "absolute paths"),
    "unknown Ansible package": (dict(GOOD, pull_ansible_package="ansible-base"), "pull_ansible_package", "ansible-base"),
    "check mode not a boolean": (dict(GOOD, pull_check_mode_enabled="sometimes"), "pull_check_mode_enabled", "must be true or false"),
    "node name with a slash": (dict(GOOD, pull_node_name="../gpu-7"), "pull_node_name", "must be a host name"),
    "bucket name with capitals": (dict(GOOD, pull_report_bucket="Fleet_Reports"), "pull_report_bucket", "bucket name"),
    "endpoint without a scheme": (
        dict(GOOD, pull_report_bucket="fleet", pull_report_endpoint="oss-cn-hangzhou.aliyuncs.com"),
        "pull_report_endpoint",
        "the URL of an S3 API",
    ),
    "region with a space": (dict(GOOD, pull_report_region="us east 1"), "pull_report_region", "a region name"),
    "prefix with a double slash": (dict(GOOD, pull_report_prefix="gpufleet//drift"), "pull_report_prefix", "single slashes"),
    "relative credentials file": (
        dict(GOOD, pull_report_credentials_file="restic.env"),
        "pull_report_credentials_file",
        "absolute path",
    ),
}

test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.pull",
    CASES,
    files=[
        "/usr/local/lib/gpufleet/gpufleet-pull.py",
        "/etc/gpufleet/pull.json",
        "/etc/systemd/system/gpufleet-pull.timer",
        "/opt/gpufleet/pull",
    ],
    packages=["git"],
)
