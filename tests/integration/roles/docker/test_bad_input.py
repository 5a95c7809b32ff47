"""Bad inputs to gpufleet.cloud.docker fail before anything changes.

Each case applies the role to a fresh real node (all cases in one run, see
../bad_input.py): the run fails, the
message names the bad variable, no task changed, and the engine and its
configuration are still absent."""

from __future__ import annotations

import pytest

from tests.integration.roles.bad_input import bad_input_test

pytestmark = pytest.mark.lab

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

# Files the role manages: none may exist after a failed run.
PATHS = ["/etc/docker/daemon.json", "/etc/docker/nccl.env"]

CASES = {
    # _common's input hygiene (gpufleet.cloud.preflight): a misspelt role
    # variable fails once gpufleet_strict_inputs is on, naming the option meant.
    "misspelt variable, strict": (
        {"docker_user": ["root"], "gpufleet_strict_inputs": True},
        "docker_user",
        "did you mean docker_users?",
    ),
    # dockerd would refuse to start with these daemon.json values.
    "daemon.json: string for a boolean": (
        {"docker_daemon_config_extra": {"live-restore": "yes"}}, "docker_daemon_config_extra", "live-restore must be a boolean"),
    "daemon.json: number for a log option": (
        {"docker_daemon_config": {"log-driver": "json-file", "log-opts": {"max-file": 3}}},
        "docker_daemon_config",
    ),
    "daemon.json: string for a list": (
        {"docker_daemon_config_extra": {"dns": "10.0.0.2"}}, "docker_daemon_config_extra", "dns must be a list"),
    "daemon.json: misspelt key": ({"docker_daemon_config_extra": {"live_restore": True}}, "docker_daemon_config_extra"),
    "daemon.json: socket outside the role": (
        {"docker_daemon_config_extra": {"hosts": ["tcp://0.0.0.0:2375"]}},
        "docker_daemon_config",
    ),
    "tcp socket without tls": ({"docker_tcp_listen": "0.0.0.0:2376"}, "docker_tcp_listen"),
    "tcp socket with part of tls": (
        {"docker_tcp_listen": "0.0.0.0:2376", "docker_tls_ca_cert": PEM, "docker_tls_cert": PEM},
        "docker_tls_key",
    ),
    "unknown choice": ({"docker_source": "snap"}, "docker_source"),
    "wrong type: list expected": ({"docker_users": "root"}, "docker_users", "expected a list"),
    "wrong type: bool expected": ({"docker_users_exclusive": "perhaps"}, "docker_users_exclusive", "perhaps"),
    "wrong type: dict expected": ({"docker_daemon_config_extra": "debug=true"}, "docker_daemon_config_extra"),
    "user that does not exist": ({"docker_users": ["nosuchuser"]}, "docker_users"),
    "bad ulimit": ({"docker_default_ulimits": {"memlock": {"Name": "memlock", "Soft": "lots", "Hard": -1}}}, "docker_default_ulimits"),
    "bad nccl variable name": ({"docker_nccl_env": {"NCCL DEBUG": "INFO"}}, "docker_nccl_env"),
    "nccl value that is not a scalar": ({"nccl_conf": {"NCCL_DEBUG": ["INFO"]}}, "docker_nccl_env"),
    "relative data root": ({"docker_data_root": "data/docker"}, "docker_data_root"),
    "bad repository url": ({"docker_nvidia_repo_url": "nvidia.github.io/libnvidia-container"}, "docker_nvidia_repo_url"),
    "key id for a fingerprint": ({"docker_nvidia_repo_key_fingerprints": ["F796ECB0"]}, "docker_nvidia_repo_key_fingerprints"),
}


test_bad_input_fails_in_preflight_and_changes_nothing = bad_input_test(
    "gpufleet.cloud.docker",
    CASES,
    files=PATHS,
    packages=["docker.io"],
    # The PEM data must never be printed.
    forbidden=["MIIB"],
)
