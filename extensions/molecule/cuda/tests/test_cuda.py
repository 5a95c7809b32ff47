"""What a container node converged by gpufleet.cloud.cuda (Debian non-free,
runtime component only) really has: this scenario's Debian 12 node, and the
lab fleet's GPU-stack node on Debian 13, which
tests/integration/test_drift.py runs this file against."""

from __future__ import annotations

import re

from conftest import assert_file, assert_package

# Debian's toolkit per release, and the soname of its runtime.
VERSION = {12: "11.8", 13: "12.4"}
RUNTIME = {12: "libcudart11.0", 13: "libcudart12"}
SONAME = {12: "libcudart.so.11.0", 13: "libcudart.so.12"}


def test_runtime_at_the_pinned_toolkit_version_and_held(host, major):
    version, package = VERSION[major], RUNTIME[major]
    # 12.4.127~12.4.1-2: the toolkit version follows the tilde.
    assert f"~{version}." in assert_package(host, package)
    assert package in host.check_output("apt-mark showhold").split()
    assert_file(
        host,
        "/etc/apt/preferences.d/gpufleet-cuda",
        contains=("Package: src:nvidia-cuda-toolkit", f"Pin: version *~{version}.*", "Pin-Priority: 1001"),
    )


def test_the_whole_toolkit_is_not_installed(host):
    # cudart only: the 2.8 GB toolkit stays out, and no tools are linked.
    assert not host.package("nvidia-cuda-toolkit").is_installed
    assert not host.file("/usr/local/cuda/bin").exists


def test_usr_local_cuda_is_the_selected_alternative(host, major):
    version = VERSION[major]
    query = host.check_output("update-alternatives --query cuda")
    assert re.search(r"^Status: manual$", query, re.M), query
    assert re.search(rf"^Value: /usr/local/cuda-{re.escape(version)}$", query, re.M), query
    assert host.check_output("readlink -f /usr/local/cuda") == f"/usr/local/cuda-{version}"


def test_home_reaches_debians_runtime(host, major):
    soname = SONAME[major]
    lib = host.file(f"/usr/local/cuda/lib64/{soname}")
    assert lib.exists, f"/usr/local/cuda/lib64/{soname} does not lead to Debian's runtime"
    assert host.check_output(f"readlink -f /usr/local/cuda/lib64/{soname}").startswith("/usr/lib/x86_64-linux-gnu/")


def test_login_shells_get_cuda_home_and_path(host):
    assert_file(host, "/etc/profile.d/gpufleet-cuda.sh", contains=("export CUDA_HOME=/usr/local/cuda",))
    env = host.check_output("bash -lc 'echo $CUDA_HOME; echo $PATH'").splitlines()
    assert env[0] == "/usr/local/cuda"
    assert env[1].split(":")[0] == "/usr/local/cuda/bin"
    # Sourcing the profile twice does not stack the PATH entry.
    twice = host.check_output("bash -lc '. /etc/profile.d/gpufleet-cuda.sh; echo $PATH'")
    assert twice.split(":").count("/usr/local/cuda/bin") == 1


def test_linker_reads_the_toolkit_path(host, major):
    assert_file(host, "/etc/ld.so.conf.d/gpufleet-cuda.conf", contains=("/usr/local/cuda/lib64\n",))
    # With Debian's layout /usr/local/cuda/lib64 is the multiarch library
    # directory, so ldconfig reports it as given twice, naming our file:
    # proof that it reads the entry and resolves it through the alternative.
    scan = host.run("ldconfig -v -N").stderr
    assert "/etc/ld.so.conf.d/gpufleet-cuda.conf:3" in scan, scan[:2000]
    soname = SONAME[major]
    assert re.search(rf"^\s+{re.escape(soname)} \(", host.check_output("ldconfig -p"), re.M)
