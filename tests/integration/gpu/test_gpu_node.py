"""A GPU node converged by nvidia_driver, cuda and nccl, checked on the
node itself: run on a machine with an NVIDIA GPU (the `gpu` Molecule
scenario verifies with these, or `pytest -m gpu tests/integration/gpu`
after site.yml). Everywhere else they skip."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.nodes import ansible_env

pytestmark = pytest.mark.gpu

LOCAL_FACT = Path("/etc/ansible/facts.d/gpufleet_nvidia_driver.fact")


def run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def gpu_node():
    smi = shutil.which("nvidia-smi")
    if not smi or run(smi, "-L").returncode != 0:
        pytest.skip("no NVIDIA GPU with a working driver on this machine")
    if not LOCAL_FACT.exists():
        pytest.skip("this machine was not converged by gpufleet.cloud.nvidia_driver")


def query_gpus(*fields: str) -> list[dict[str, str]]:
    out = run("nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits").stdout
    return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.splitlines() if line.strip()]


def test_loaded_module_is_the_pinned_version():
    pinned = json.loads(LOCAL_FACT.read_text())["version"]
    loaded = Path("/sys/module/nvidia/version").read_text().strip()
    assert loaded == pinned
    assert run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader").stdout.split()[0] == pinned


def test_driver_packages_are_held():
    if not shutil.which("apt-mark"):
        pytest.skip("holds are checked on apt systems")
    pin = Path("/etc/apt/preferences.d/gpufleet-nvidia_driver").read_text()
    assert "Pin: version " + json.loads(LOCAL_FACT.read_text())["version"] + "*" in pin
    assert run("apt-mark", "showhold").stdout.split(), "no package is held"


def test_gpu_facts_agrees_with_nvidia_smi():
    env = ansible_env() | {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"}
    result = run("ansible", "localhost", "-c", "local", "-m", "gpufleet.cloud.gpu_facts", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    facts = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["ansible_facts"]["gpu"]
    smi = query_gpus("index", "name", "uuid", "pci.bus_id", "memory.total", "persistence_mode", "pcie.link.gen.max",
                     "pcie.link.width.max")
    assert facts["count"] == len(smi) > 0
    assert facts["driver_version"] == facts["loaded_module_version"]
    for ours, theirs in zip(facts["gpus"], smi):
        assert ours["index"] == int(theirs["index"])
        assert ours["name"] == theirs["name"]
        assert ours["uuid"] == theirs["uuid"]
        assert ours["pci_bus_id"] == theirs["pci.bus_id"]
        assert ours["memory_total_mib"] == int(theirs["memory.total"])
        assert ours["persistence_mode"] is (theirs["persistence_mode"] == "Enabled")
        assert ours["pcie"]["gen_max"] == int(theirs["pcie.link.gen.max"])
        assert ours["pcie"]["width_max"] == int(theirs["pcie.link.width.max"])
    # The persistence daemon the role started keeps every GPU initialised.
    assert all(gpu["persistence_mode"] for gpu in facts["gpus"])


CUDA_PROGRAM = r"""
#include <cstdio>
__global__ void square(int *v) { v[threadIdx.x] *= v[threadIdx.x]; }
int main() {
    int host[32], *dev;
    for (int i = 0; i < 32; ++i) host[i] = i;
    if (cudaMalloc(&dev, sizeof host) != cudaSuccess) return 2;
    cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
    square<<<1, 32>>>(dev);
    cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost);
    if (cudaDeviceSynchronize() != cudaSuccess) return 3;
    printf("%d\n", host[31]);
    return 0;
}
"""


def test_nvcc_builds_a_kernel_that_runs(tmp_path):
    nvcc = "/usr/local/cuda/bin/nvcc"
    if not os.access(nvcc, os.X_OK):
        pytest.fail("nvcc is missing: the cuda role's toolkit is not installed at /usr/local/cuda")
    source = tmp_path / "square.cu"
    source.write_text(CUDA_PROGRAM)
    build = run(nvcc, "-o", str(tmp_path / "square"), str(source))
    assert build.returncode == 0, build.stderr
    result = run(str(tmp_path / "square"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(31 * 31)


def test_nccl_all_reduce_runs_on_every_gpu():
    found = sorted(glob.glob("/opt/nccl-tests/nccl-tests-*/build/all_reduce_perf"))
    assert found, "the nccl role did not build nccl-tests"
    count = len(query_gpus("index"))
    result = run(found[-1], "-b", "8", "-e", "128M", "-f", "2", "-g", str(count))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# Out of bounds values : 0 OK" in result.stdout
