"""What a Debian 13 container converged by gpufleet.cloud.cuda and
gpufleet.cloud.nccl (Debian non-free) really has. No GPU: nccl-tests is
not built or run (nccl_tests=auto)."""

from __future__ import annotations

from conftest import assert_file, assert_package

EXPECTED_CONF = (
    "NCCL_DEBUG=INFO\n"
    "NCCL_IB_GID_INDEX=3\n"
    "NCCL_IB_HCA=mlx5_0,mlx5_1\n"
    "NCCL_SOCKET_IFNAME=eth0\n"
)


def settings(content: str) -> str:
    return "".join(line + "\n" for line in content.splitlines() if line and not line.startswith("#"))


def test_nccl_at_the_pinned_version_built_for_the_toolkit(host):
    # Debian's 2.22.3-1-1 is built against its own CUDA 12.4, the toolkit
    # the cuda role pinned beside it.
    assert assert_package(host, "libnccl2").startswith("2.22.3-1-")
    assert "~12.4." in assert_package(host, "libcudart12")
    assert "libnccl2" in host.check_output("apt-mark showhold").split()
    assert_file(
        host, "/etc/apt/preferences.d/gpufleet-nccl", contains=("Package: libnccl2\n", "Pin: version 2.22.3-1-*\n")
    )


def test_only_the_listed_packages(host):
    assert not host.package("libnccl-dev").is_installed


def test_nccl_conf_from_the_dictionary(host):
    content = assert_file(host, "/etc/nccl.conf")
    assert settings(content) == EXPECTED_CONF
    assert "NCCL 2.22.3-1 for CUDA 12.4" in content


def test_env_file_for_containers_matches(host):
    content = assert_file(host, "/etc/gpufleet/nccl.env")
    assert settings(content) == EXPECTED_CONF
    # The format docker's --env-file reads: the shell sees the same values.
    env = host.check_output("set -a; . /etc/gpufleet/nccl.env; echo $NCCL_IB_HCA $NCCL_IB_GID_INDEX")
    assert env == "mlx5_0,mlx5_1 3"


def test_no_bandwidth_test_without_gpus(host):
    assert not host.file("/opt/nccl-tests").exists
