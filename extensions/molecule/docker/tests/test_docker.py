"""What a node converged by gpufleet.cloud.docker really has.

docker-debian12: the distribution's engine, GPU support off, data root and
sockets at Docker's defaults. docker-debian13: GPU support forced on with the
toolkit from a local copy of NVIDIA's repository (stand-in packages, see
tests/emulators/nvidia_repos.py, served on the node's loopback by
../shared/nvidia_repos.yml), the data root on a separate disk, and the API on
TCP with TLS on the node's loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import testinfra
from conftest import assert_file, assert_package, assert_unit_running

IMAGE = "gpufleet-test/rootfs:1"
# systemd's "unit started" journal message: one per start of docker.service.
STARTED = "MESSAGE_ID=39f53479d3a045ac8e11786248231fbf"
TLS = "--tlsverify --tlscacert /srv/tls/ca.pem -H tcp://127.0.0.1:2376"
CLIENT_CERT = "--tlscert /srv/tls/client-cert.pem --tlskey /srv/tls/client-key.pem"
# The stand-in toolkit's version in tests/emulators/nvidia_repos.py.
TOOLKIT_VERSION = "1.18.0-1"


def is_gpu_node(host) -> bool:
    return host.backend.hostname.endswith("debian13")


def docker_info(host) -> dict:
    return json.loads(host.check_output("docker info --format '{{json .}}'"))


@pytest.fixture(scope="module")
def image(host):
    """A local image made with `docker import` from a rootfs tarball (no
    registry is reachable): dash, cat and env with their libraries."""
    script = (Path(__file__).parents[1] / "files" / "import-test-image.sh").read_text()
    host.check_output("sh -c %s sh %s /usr/bin/dash /usr/bin/cat /usr/bin/env", script, IMAGE)
    return IMAGE


def test_engine_and_toolkit_installed(host):
    assert_package(host, "docker.io")
    toolkit = host.package("nvidia-container-toolkit")
    if is_gpu_node(host):
        assert_package(host, "docker-cli")
        # From the mirror, through the role's key and repository.
        assert toolkit.is_installed and toolkit.version == TOOLKIT_VERSION
        assert_package(host, "nvidia-container-toolkit-base")
        assert_file(
            host,
            "/etc/apt/sources.list.d/gpufleet-nvidia-container-toolkit.sources",
            contains=(
                "URIs: http://127.0.0.1:8089/libnvidia-container/stable/deb/amd64",
                "Suites: /",
                "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-container-toolkit.asc",
            ),
        )
    else:
        assert not toolkit.is_installed
        assert not host.file("/etc/apt/sources.list.d/gpufleet-nvidia-container-toolkit.sources").exists


def test_dockerd_runs(host):
    assert_unit_running(host, "docker")


def test_daemon_json_is_the_configured_dictionary(host):
    config = json.loads(assert_file(host, "/etc/docker/daemon.json"))
    expected = {
        "log-driver": "json-file",
        "log-opts": {"max-size": "20m", "max-file": "3"},
        "live-restore": True,
        "default-ulimits": {"nofile": {"Name": "nofile", "Soft": 4096, "Hard": 8192}},
    }
    if is_gpu_node(host):
        expected |= {
            "data-root": "/mnt/nvme0/docker",
            "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}},
            "default-runtime": "nvidia",
            "hosts": ["fd://", "tcp://127.0.0.1:2376"],
            "tls": True,
            "tlsverify": True,
            "tlscacert": "/etc/docker/tls/ca.pem",
            "tlscert": "/etc/docker/tls/cert.pem",
            "tlskey": "/etc/docker/tls/key.pem",
        }
    assert config == expected


def test_docker_info_shows_the_configuration(host):
    info = docker_info(host)
    assert info["LoggingDriver"] == "json-file"
    assert info["LiveRestoreEnabled"] is True
    assert info["Driver"] == "overlay2"
    if is_gpu_node(host):
        assert info["DockerRootDir"] == "/mnt/nvme0/docker"
        assert info["DefaultRuntime"] == "nvidia"
        assert "nvidia" in info["Runtimes"]
    else:
        assert info["DockerRootDir"] == "/var/lib/docker"
        assert info["DefaultRuntime"] == "runc"
        assert "nvidia" not in info["Runtimes"]


def test_container_runs_from_imported_image_with_configured_limits(host, image):
    limits = host.check_output(f"docker run --rm {image} /usr/bin/cat /proc/self/limits")
    assert "Max open files            4096                 8192" in limits
    if is_gpu_node(host):
        # dockerd ran it through the nvidia runtime, its default here.
        calls = host.file("/run/gpufleet-test-nvidia-runtime.log").content_string
        assert " create " in calls


def test_containers_get_the_log_rotation(host, image):
    name = "gpufleet-test-logs"
    host.run(f"docker rm -f {name}")
    host.check_output(f"docker run --name {name} {image} /usr/bin/cat /etc/hostname")
    log_config = json.loads(host.check_output(f"docker inspect --format '{{{{json .HostConfig.LogConfig}}}}' {name}"))
    host.run(f"docker rm -f {name}")
    assert log_config["Type"] == "json-file"
    # Docker 20.10 fills these in at log-driver start, 23 and later at create.
    if log_config["Config"]:
        assert log_config["Config"] == {"max-size": "20m", "max-file": "3"}


def test_docker_group_users_reach_the_engine(host, image):
    assert "docker" in host.check_output("id -nG trainer").split()
    out = host.run(f"runuser -u trainer -- docker run --rm {image} /usr/bin/cat /etc/hostname")
    assert out.rc == 0, out.stderr


def test_nccl_env_file_reaches_containers(host, image):
    content = assert_file(host, "/etc/docker/nccl.env")
    settings = [line for line in content.splitlines() if line and not line.startswith("#")]
    assert settings == ["NCCL_DEBUG=WARN", "NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=^lo,docker"]
    env = host.check_output(f"docker run --rm --env-file /etc/docker/nccl.env {image} /usr/bin/env").splitlines()
    assert set(settings) <= set(env)


def test_no_cdi_spec_without_gpus(host):
    assert not host.file("/etc/cdi/nvidia.yaml").exists


def test_api_on_tcp_only_when_asked_and_only_with_tls(host):
    listeners = host.check_output("ss -Hltnp")
    if not is_gpu_node(host):
        assert "dockerd" not in listeners
        assert not host.file("/etc/docker/tls").exists
        return
    dockerd = [line.split()[3] for line in listeners.splitlines() if "dockerd" in line]
    assert dockerd == ["127.0.0.1:2376"]
    assert_file(host, "/etc/docker/tls/key.pem", mode=0o600)
    assert host.run(f"docker {TLS} {CLIENT_CERT} version --format '{{{{.Server.Version}}}}'").rc == 0
    # No client certificate, or no TLS at all: refused.
    assert host.run(f"docker {TLS} version").rc != 0
    assert host.run("docker -H tcp://127.0.0.1:2376 version").rc != 0
    # The local socket still works next to it.
    assert host.run("docker -H unix:///var/run/docker.sock version").rc == 0


def _starts(node) -> int:
    return len(node.check_output(f"journalctl -q -o cat UNIT=docker.service {STARTED}").splitlines())


def _converge(*extra: str) -> subprocess.CompletedProcess:
    """The scenario's converge.yml, run the way Molecule runs it."""
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    playbook = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"]) / "converge.yml"
    exe = shutil.which("ansible-playbook")
    assert exe, "ansible-playbook is not on PATH"
    return subprocess.run(
        [exe, "--inventory", str(inventory), *extra, str(playbook)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"),
    )


def _changed(output: str) -> dict[str, int]:
    recap = output[output.rindex("PLAY RECAP") :]
    return {
        line.split()[0]: int(line.split("changed=")[1].split()[0]) for line in recap.splitlines() if "changed=" in line
    }


@pytest.fixture(scope="module")
def restarts(request):
    """Change daemon.json, apply it twice, then put it back; count dockerd
    starts in the journal around each run, on every node."""
    names = request.config.option.hosts.split(",")
    nodes = {name: testinfra.get_host(f"podman://{name}") for name in names}
    # The daemon step of the role (its preflight always runs too).
    daemon = ("--tags", "docker_daemon")
    debug_on = (*daemon, "--extra-vars", json.dumps({"docker_daemon_config_extra": {"debug": True}}))
    steps = {}
    for step, args in (("change", debug_on), ("again", debug_on), ("revert", daemon)):
        before = {name: _starts(node) for name, node in nodes.items()}
        result = _converge(*args)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        steps[step] = {
            name: {
                "changed": _changed(result.stdout)[name],
                "starts": _starts(node) - before[name],
                "debug": docker_info(node)["Debug"],
            }
            for name, node in nodes.items()
        }
    return steps


def test_daemon_json_change_restarts_once_and_reapplying_changes_nothing(host, restarts):
    name = host.backend.hostname
    assert restarts["change"][name]["changed"] > 0
    assert restarts["change"][name]["starts"] == 1
    assert restarts["change"][name]["debug"] is True
    assert restarts["again"][name] == {"changed": 0, "starts": 0, "debug": True}
    assert restarts["revert"][name]["starts"] == 1
    assert restarts["revert"][name]["debug"] is False
