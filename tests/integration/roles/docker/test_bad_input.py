"""Bad inputs to gpufleet.cloud.docker fail before anything changes.

Each case runs the role against a fresh real node: the run fails, the
message names the bad variable, no task changed, and the engine and its
configuration are still absent."""

from __future__ import annotations

import pytest

from tests.integration.helpers import assert_fails_before_changing

pytestmark = pytest.mark.lab

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

# Files the role manages: none may exist after a failed run.
PATHS = ["/etc/docker/daemon.json", "/etc/docker/nccl.env"]

CASES = {
    # dockerd would refuse to start with these daemon.json values.
    "daemon.json: string for a boolean": ({"docker_daemon_config_extra": {"live-restore": "yes"}}, "docker_daemon_config"),
    "daemon.json: number for a log option": (
        {"docker_daemon_config": {"log-driver": "json-file", "log-opts": {"max-file": 3}}},
        "docker_daemon_config",
    ),
    "daemon.json: string for a list": ({"docker_daemon_config_extra": {"dns": "10.0.0.2"}}, "docker_daemon_config"),
    "daemon.json: misspelt key": ({"docker_daemon_config_extra": {"live_restore": True}}, "docker_daemon_config"),
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
    "wrong type: list expected": ({"docker_users": "root"}, "docker_users"),
    "wrong type: dict expected": ({"docker_daemon_config_extra": "debug=true"}, "docker_daemon_config_extra"),
    "user that does not exist": ({"docker_users": ["nosuchuser"]}, "docker_users"),
    "bad ulimit": ({"docker_default_ulimits": {"memlock": {"Name": "memlock", "Soft": "lots", "Hard": -1}}}, "docker_default_ulimits"),
    "bad nccl variable name": ({"docker_nccl_env": {"NCCL DEBUG": "INFO"}}, "docker_nccl_env"),
    "nccl value that is not a scalar": ({"nccl_conf": {"NCCL_DEBUG": ["INFO"]}}, "docker_nccl_env"),
    "relative data root": ({"docker_data_root": "data/docker"}, "docker_data_root"),
    "bad repository url": ({"docker_nvidia_repo_url": "nvidia.github.io/libnvidia-container"}, "docker_nvidia_repo_url"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_fails_in_preflight_and_changes_nothing(case, fresh_node, tmp_path):
    extra_vars, variable = CASES[case]
    out = assert_fails_before_changing(
        fresh_node, "gpufleet.cloud.docker", extra_vars, variable, tmp_path, paths=PATHS, packages=["docker.io"]
    )
    assert "MIIB" not in out, "PEM data is in the output"
