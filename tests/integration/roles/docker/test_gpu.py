"""On a machine with NVIDIA GPUs, containers see them after the docker role.

The test applies gpufleet.cloud.docker to the machine it runs on (as root),
with the toolkit from NVIDIA's repository, or from the mirror given in the
file named by GPUFLEET_TEST_EXTRA_VARS. It skips where nvidia-smi cannot
reach a driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from tests.integration.helpers import converge_this_machine
from tests.support.nodes import ROOT

pytestmark = pytest.mark.gpu

IMAGE = "gpufleet-test/gpu:1"
IMPORT_SCRIPT = ROOT / "extensions" / "molecule" / "docker" / "files" / "import-test-image.sh"


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def gpu_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("GPU ")]


@pytest.fixture(scope="module")
def host_gpus() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        pytest.skip("no nvidia-smi: not a GPU machine")
    listed = run(smi, "-L")
    if listed.returncode != 0 or not gpu_lines(listed.stdout):
        pytest.skip(f"nvidia-smi cannot reach a driver: {listed.stdout}{listed.stderr}".strip())
    if os.geteuid() != 0:
        pytest.skip("the docker role is applied to this machine, which needs root")
    return gpu_lines(listed.stdout)


@pytest.fixture(scope="module")
def image(host_gpus, tmp_path_factory) -> str:
    converge_this_machine("gpufleet.cloud.docker", {}, tmp_path_factory.mktemp("docker"))
    # nvidia-smi and its C library come from this machine; the driver's
    # libraries and device nodes only reach the container through the toolkit.
    made = run("sh", str(IMPORT_SCRIPT), IMAGE, "/usr/bin/dash", shutil.which("nvidia-smi"))
    assert made.returncode == 0, made.stderr
    return IMAGE


def test_nvidia_is_the_default_runtime(image):
    info = json.loads(run("docker", "info", "--format", "{{json .}}").stdout)
    assert info["DefaultRuntime"] == "nvidia"
    assert "nvidia" in info["Runtimes"]


def test_docker_run_gpus_all_sees_every_gpu(image, host_gpus):
    out = run("docker", "run", "--rm", "--gpus", "all", image, "nvidia-smi", "-L")
    assert out.returncode == 0, out.stderr
    assert gpu_lines(out.stdout) == host_gpus


def test_default_runtime_gives_gpus_without_flags(image, host_gpus):
    out = run("docker", "run", "--rm", "-e", "NVIDIA_VISIBLE_DEVICES=all", image, "nvidia-smi", "-L")
    assert out.returncode == 0, out.stderr
    assert gpu_lines(out.stdout) == host_gpus


def test_cdi_spec_names_every_gpu(image, host_gpus):
    with open("/etc/cdi/nvidia.yaml", encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    assert spec["kind"] == "nvidia.com/gpu"
    names = {str(device["name"]) for device in spec["devices"]}
    assert {str(i) for i in range(len(host_gpus))} | {"all"} <= names


def test_docker_run_with_cdi_device_sees_every_gpu(image, host_gpus):
    version = run("docker", "version", "--format", "{{.Server.Version}}").stdout.strip()
    if int(version.split(".")[0]) < 25:
        pytest.skip(f"Docker {version} has no CDI support (25 and later)")
    out = run("docker", "run", "--rm", "--device", "nvidia.com/gpu=all", image, "nvidia-smi", "-L")
    assert out.returncode == 0, out.stderr
    assert gpu_lines(out.stdout) == host_gpus
