"""Bad inputs to gpufleet.cloud.backup fail in preflight and change nothing."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

GOOD = {
    "backup_repository_endpoint": "s3.us-east-1.amazonaws.com",
    "backup_repository_bucket": "gpufleet-backup",
    "backup_password": "a-long-enough-password",
    "backup_paths": ["/srv/data"],
}

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"backup_path": ["/srv"], "gpufleet_strict_inputs": True},
        "backup_path",
        "did you mean backup_paths?",
    ),
    "string for a list": ({"backup_exclude": "*.tmp"}, "backup_exclude", "expected a list"),
    "schedule cannot meet the RPO": ({"backup_rpo_minutes": 5, "backup_interval_seconds": 300}, "backup_rpo_minutes",
                                     "Shorten the interval"),
    # No schedule meets an RPO of 0: the advice is to raise it, not to
    # shorten the interval.
    "RPO of zero": ({"backup_rpo_minutes": 0}, "backup_rpo_minutes", "must be at least 1"),
    "missing bucket endpoint": ({"backup_repository_endpoint": ""}, "backup_repository_endpoint"),
    "unknown KMS provider for the password": (
        {"backup_password": "", "backup_password_kms": {"provider": "gcp", "key_id": "k"}}, "backup_password_kms"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.backup",
    CASES,
    files=["/etc/gpufleet/backup"],
    packages=["restic"],
    good=GOOD,
)
