"""tests/emulators/nvidia_repos.py, checked with tools it did not write:
gpgv, gpg, dpkg-deb and apt itself."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.emulators import nvidia_repos

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("dpkg-deb", "gpg", "gpgv", "gpgconf")),
    reason="needs dpkg-deb, gpg, gpgv and gpgconf",
)

CUDA_DIRS = ["cuda/debian12/x86_64", "cuda/debian13/x86_64"]
TOOLKIT_DIR = "libnvidia-container/stable/deb/amd64"
REPO_DIRS = [*CUDA_DIRS, TOOLKIT_DIR]
KEY_OF = {**dict.fromkeys(CUDA_DIRS, "cuda"), TOOLKIT_DIR: "libnvidia-container"}
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror") / "nvidia"
    return root, nvidia_repos.build(root)


@pytest.fixture(scope="module")
def root(built):
    return built[0]


@pytest.fixture(scope="module")
def manifest(built):
    return built[1]


@pytest.fixture(scope="module")
def keyrings(root, manifest, tmp_path_factory):
    """Each key file, dearmored by gpg for gpgv and apt."""
    out = tmp_path_factory.mktemp("keyrings")
    rings = {}
    for name, key in manifest["keys"].items():
        rings[name] = out / f"{name}.gpg"
        subprocess.run(["gpg", "--dearmor", "--output", str(rings[name]), str(root / key["file"])], check=True)
    return rings


def run(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)


def index(directory: Path) -> list[dict[str, str]]:
    entries = []
    for stanza in (directory / "Packages").read_text().strip().split("\n\n"):
        entries.append(dict(re.findall(r"^([\w-]+): (.*)$", stanza, re.M)))
    return entries


def listed(manifest, directory: str) -> dict[str, set[str]]:
    versions: dict[str, set[str]] = {}
    for name, version in manifest["packages"][directory]:
        versions.setdefault(name, set()).add(version)
    return versions


def deb(root: Path, directory: str, name: str, version: str) -> Path:
    return root / directory / f"{name}_{version.split(':')[-1]}_amd64.deb"


def extract(root: Path, out: Path, *packages: tuple[str, str], directory: str = CUDA_DIRS[0]) -> Path:
    for name, version in packages:
        subprocess.run(["dpkg-deb", "-x", str(deb(root, directory, name, version)), str(out)], check=True)
    return out


@pytest.mark.parametrize("directory", REPO_DIRS)
def test_each_repository_has_its_index_files(root, directory):
    names = {path.name for path in (root / directory).iterdir()}
    assert {"Packages", "Packages.gz", "Release", "Release.gpg", "InRelease"} <= names
    assert any(name.endswith(".deb") for name in names)


def test_keys_sit_where_nvidia_keeps_them(root, manifest):
    for directory in CUDA_DIRS:
        assert (root / directory / "3bf863cc.pub").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert (root / "libnvidia-container/gpgkey").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert manifest["keys"]["cuda"]["file"] == "cuda/debian12/x86_64/3bf863cc.pub"
    assert manifest["keys"]["libnvidia-container"]["file"] == "libnvidia-container/gpgkey"


def test_manifest_fingerprints_are_the_key_files(root, manifest):
    fingerprints = set()
    for key in manifest["keys"].values():
        for path in key["files"]:
            shown = run("gpg", "--show-keys", "--with-colons", str(root / path)).stdout
            fprs = [line.split(":")[9] for line in shown.splitlines() if line.startswith("fpr:")]
            assert fprs == [key["fingerprint"]]
        assert re.fullmatch(r"[0-9A-F]{40}", key["fingerprint"])
        fingerprints.add(key["fingerprint"])
    # NVIDIA signs the two repositories with different keys.
    assert len(fingerprints) == 2


@pytest.mark.parametrize("directory", REPO_DIRS)
def test_gpgv_verifies_both_signatures_with_the_repositorys_key(root, keyrings, directory):
    repo = root / directory
    ring = str(keyrings[KEY_OF[directory]])
    inrelease = run("gpgv", "--keyring", ring, str(repo / "InRelease"))
    assert inrelease.returncode == 0, inrelease.stderr
    detached = run("gpgv", "--keyring", ring, str(repo / "Release.gpg"), str(repo / "Release"))
    assert detached.returncode == 0, detached.stderr
    other = next(name for name in keyrings if name != KEY_OF[directory])
    assert run("gpgv", "--keyring", str(keyrings[other]), str(repo / "InRelease")).returncode != 0


@pytest.mark.parametrize("directory", REPO_DIRS)
def test_release_lists_the_indexes_checksums(root, directory):
    repo = root / directory
    assert gzip.decompress((repo / "Packages.gz").read_bytes()) == (repo / "Packages").read_bytes()
    release = (repo / "Release").read_text()
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        assert f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n" in release


@pytest.mark.parametrize("directory", REPO_DIRS)
def test_index_entries_match_the_debs_and_the_manifest(root, manifest, directory):
    seen = []
    for entry in index(root / directory):
        path = root / directory / entry["Filename"]
        data = path.read_bytes()
        assert entry["Size"] == str(len(data))
        assert entry["SHA256"] == hashlib.sha256(data).hexdigest()
        fields = run("dpkg-deb", "--field", str(path), "Package", "Version", "Maintainer").stdout
        assert fields.splitlines() == [
            f"Package: {entry['Package']}",
            f"Version: {entry['Version']}",
            "Maintainer: gpufleet tests <tests@gpufleet.invalid>",
        ]
        assert "gpufleet test stand-in" in run("dpkg-deb", "--field", str(path), "Description").stdout
        seen.append([entry["Package"], entry["Version"]])
    assert sorted(seen) == sorted(manifest["packages"][directory])


def test_driver_branches_before_and_after_the_590_rename(manifest):
    versions = listed(manifest, CUDA_DIRS[0])
    every = {"570.195.03-1", "580.95.05-1", "590.44.01-1"}
    for name in ("nvidia-open", "cuda-drivers", "nvidia-kernel-open-dkms", "nvidia-driver-cuda", "libcuda1"):
        assert versions[name] == every, name
    for branch, version in (("570", "570.195.03-1"), ("580", "580.95.05-1")):
        for name in ("nvidia-open", "cuda-drivers", "nvidia-fabricmanager"):
            assert versions[f"{name}-{branch}"] == {version}
    for gone in ("nvidia-open-590", "cuda-drivers-590", "nvidia-fabricmanager-590"):
        assert gone not in versions
    assert versions["nvidia-fabricmanager"] == {"590.44.01-1"}
    assert versions["nvidia-driver-pinning-590"] == {"590.44.01-1"}
    assert versions["nvidia-driver-pinning-590.44.01"] == {"590.44.01-1"}


def test_branch_metapackages_lock_their_versions(root):
    path = deb(root, CUDA_DIRS[0], "nvidia-open-580", "580.95.05-1")
    depends = run("dpkg-deb", "--field", str(path), "Depends").stdout
    for name in ("nvidia-kernel-open-dkms", "nvidia-driver-cuda", "libcuda1", "libnvidia-ml1"):
        assert f"{name} (= 580.95.05-1)" in depends


def test_pinning_packages_ship_apt_preferences(root, tmp_path):
    out = extract(
        root, tmp_path, ("nvidia-driver-pinning-590", "590.44.01-1"), ("nvidia-driver-pinning-590.44.01", "590.44.01-1")
    )
    branch = (out / "etc/apt/preferences.d/nvidia-driver-pinning-590").read_text()
    exact = (out / "etc/apt/preferences.d/nvidia-driver-pinning-590.44.01").read_text()
    assert "Package: src:nvidia-graphics-drivers" in branch and "Pin: version 590.*\n" in branch
    assert "Pin: version 590.44.01-*\n" in exact
    assert "Pin-Priority: 1000" in branch and "Pin-Priority: 1000" in exact


@pytest.fixture(scope="module")
def apt(root, keyrings, tmp_path_factory):
    """apt-get and apt-cache in a throwaway root, with both repositories
    signed-by their keys and a dpkg status with dkms alone."""
    base = tmp_path_factory.mktemp("apt")
    for sub in ("etc/apt/preferences.d", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
        (base / sub).mkdir(parents=True)
    # dkms comes from the distribution, which this root does not have.
    (base / "status").write_text(
        "Package: dkms\nStatus: install ok installed\nVersion: 3.0.10-8\nArchitecture: all\n"
        "Maintainer: Debian\nDescription: stand-in\n\n"
    )
    (base / "etc/apt/sources.list").write_text(
        f"deb [signed-by={keyrings['cuda']}] file:{root / CUDA_DIRS[0]} /\n"
        f"deb [signed-by={keyrings['libnvidia-container']}] file:{root / TOOLKIT_DIR} /\n"
    )
    options = [
        f"-oDir={base}",
        f"-oDir::State::status={base / 'status'}",
        "-oAPT::Architecture=amd64",
        "-oAPT::Sandbox::User=root",
        "-oDebug::NoLocking=1",
    ]

    def call(tool, *args):
        return run(tool, *options, *args)

    call.base = base

    updated = call("apt-get", "update")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert "W:" not in updated.stdout + updated.stderr, updated.stdout + updated.stderr
    return call


@pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt")
def test_apt_accepts_the_signed_repositories_and_sees_every_branch(apt):
    policy = apt("apt-cache", "policy", "nvidia-open").stdout
    for version in ("570.195.03-1", "580.95.05-1", "590.44.01-1"):
        assert version in policy
    assert "Candidate: 590.44.01-1" in policy
    assert apt("apt-cache", "show", "nvidia-container-toolkit").stdout.count("Version: 1.18.0-1") == 1
    assert apt("apt-cache", "show", "cuda-drivers-590").returncode != 0


@pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt")
def test_apt_resolves_a_branch_only_when_pinned_as_the_roles_pin(apt):
    # As with NVIDIA's: the exact-version dependencies stay at the newest
    # candidate (590) unless apt preferences pin them, as the roles do.
    refused = apt("apt-get", "-s", "install", "nvidia-open-580")
    assert refused.returncode != 0 and "but 590.44.01-1 is to be installed" in refused.stdout
    pin = apt.base / "etc/apt/preferences.d/gpufleet-nvidia_driver"
    pin.write_text("Package: *nvidia* libcuda* cuda-drivers*\nPin: version 580.95.05*\nPin-Priority: 1001\n")
    try:
        out = apt("apt-get", "-s", "install", "nvidia-open-580")
    finally:
        pin.unlink()
    assert out.returncode == 0, out.stdout + out.stderr
    installs = dict(re.findall(r"^Inst (\S+) \((\S+)", out.stdout, re.M))
    assert installs["libcuda1"] == installs["nvidia-kernel-open-dkms"] == "580.95.05-1"
    # The nccl role names each package with the pinned version.
    nccl = ("libnccl2=2.26.2-1+cuda12.8", "libnccl-dev=2.26.2-1+cuda12.8")
    toolkit = apt("apt-get", "-s", "install", "cuda-toolkit-12-8", *nccl)
    assert toolkit.returncode == 0, toolkit.stdout + toolkit.stderr
    assert "Inst cuda-toolkit-12-config-common" in toolkit.stdout
    assert "Inst libnccl2 (2.26.2-1+cuda12.8" in toolkit.stdout


@pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt")
@pytest.mark.parametrize(
    "pair",
    [
        ("nvidia-fabricmanager-570", "nvidia-fabricmanager-580"),
        ("nvidia-fabricmanager-580", "nvidia-fabricmanager"),
        ("nvidia-fabricmanager-570", "nvidia-fabricmanager"),
    ],
)
def test_only_one_fabric_manager_installs_at_a_time(apt, pair):
    out = apt("apt-get", "-s", "install", *pair)
    assert out.returncode != 0
    assert "conflict" in (out.stdout + out.stderr).lower()


def test_fabric_manager_unit_runs_the_stand_in(root, tmp_path):
    out = extract(root, tmp_path, ("nvidia-fabricmanager-580", "580.95.05-1"))
    unit = (out / "lib/systemd/system/nvidia-fabricmanager.service").read_text()
    assert "ExecStart=/usr/bin/nv-fabricmanager\n" in unit and "Type=simple" in unit
    assert os.access(out / "usr/bin/nv-fabricmanager", os.X_OK)


def test_nvidia_smi_fails_as_without_a_driver(root, tmp_path):
    out = extract(root, tmp_path, ("nvidia-driver-cuda", "580.95.05-1"))
    for args in ([], ["-L"], ["--version"]):
        result = run(str(out / "usr/bin/nvidia-smi"), *args)
        assert result.returncode == 9
        assert NO_DRIVER in result.stdout


def test_cuda_toolkit_home_is_what_the_cuda_role_links(root, tmp_path):
    v = "12.8.1-1"
    names = ("cuda-toolkit-12-8-config-common", "cuda-cudart-12-8", "cuda-nvcc-12-8", "libcublas-12-8")
    out = extract(root, tmp_path, *((name, v) for name in names))
    home = out / "usr/local/cuda-12.8"
    assert (home / "lib64/libcudart.so.12").is_file()
    assert (home / "include/cuda_runtime.h").is_file()
    assert json.loads((home / "version.json").read_text())["cuda"]["version"] == "12.8.1"
    nvcc = run(str(home / "bin/nvcc"), "--version")
    assert nvcc.returncode == 0 and "Cuda compilation tools, release 12.8, V12.8.93" in nvcc.stdout
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb(root, CUDA_DIRS[0], "cuda-cudart-12-8", v)), str(control)], check=True)
    postinst = (control / "postinst").read_text()
    assert "update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-12.8 128" in postinst
    assert "update-alternatives --install /usr/local/cuda-12 cuda-12 /usr/local/cuda-12.8 128" in postinst


def test_nccl_header_carries_its_version(root, tmp_path):
    v = "2.27.7-1+cuda13.0"
    out = extract(root, tmp_path, ("libnccl2", v), ("libnccl-dev", v))
    header = (out / "usr/include/nccl.h").read_text()
    assert "#define NCCL_MAJOR 2\n#define NCCL_MINOR 27\n#define NCCL_PATCH 7\n" in header
    assert (out / "usr/lib/x86_64-linux-gnu/libnccl.so.2").is_file()


def test_dcgm_carries_nvidias_epoch(manifest):
    versions = listed(manifest, CUDA_DIRS[0])
    for name in ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12", "datacenter-gpu-manager-4-cuda13"):
        assert versions[name] == {"1:4.2.3-1", "1:4.4.1-1"}


@pytest.mark.parametrize("version", ["4.2.3-1", "4.4.1-1"])
def test_dcgm_core_ships_the_host_engine_and_its_service(root, tmp_path, version):
    out = extract(root, tmp_path / "pkg", ("datacenter-gpu-manager-4-core", version))
    unit = (out / "usr/lib/systemd/system/nvidia-dcgm.service").read_text()
    assert "ExecStart=/usr/bin/nv-hostengine -n" in unit
    engine = out / "usr/bin/nv-hostengine"
    assert engine.stat().st_mode & 0o111
    source = engine.read_text()
    compile(source, str(engine), "exec")
    # It answers with its own version, so a test can tell which one runs.
    assert f"DCGM 1:{version}" in source and "5555" in source


@pytest.fixture
def ctk(root, tmp_path):
    out = extract(root, tmp_path / "pkg", ("nvidia-container-toolkit-base", "1.18.0-1"), directory=TOOLKIT_DIR)
    proc = tmp_path / "proc-driver-nvidia"

    def call(*args, gpus: list[str] | None = None):
        # gpus: the PCI addresses the driver lists; None: no driver at all.
        if gpus is not None:
            (proc / "gpus").mkdir(parents=True, exist_ok=True)
            for address in gpus:
                (proc / "gpus" / address).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, GPUFLEET_TEST_NVIDIA_PROC=str(proc))
        return run(sys.executable, str(out / "usr/bin/nvidia-ctk"), *args, env=env)

    return call


def test_nvidia_ctk_runtime_configure_merges_into_daemon_json(ctk, tmp_path):
    config = tmp_path / "daemon.json"
    config.write_text(json.dumps({"log-driver": "json-file", "runtimes": {"crun": {"path": "crun"}}}))
    out = ctk("runtime", "configure", "--runtime=docker", f"--config={config}", "--set-as-default")
    assert out.returncode == 0, out.stderr
    assert json.loads(config.read_text()) == {
        "log-driver": "json-file",
        "runtimes": {"crun": {"path": "crun"}, "nvidia": {"args": [], "path": "nvidia-container-runtime"}},
        "default-runtime": "nvidia",
    }
    fresh = tmp_path / "new" / "daemon.json"
    assert ctk("runtime", "configure", "--runtime=docker", f"--config={fresh}").returncode == 0
    assert json.loads(fresh.read_text()) == {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}


def test_nvidia_ctk_cdi_generate_fails_without_a_driver(ctk):
    out = ctk("cdi", "generate", "--format=yaml")
    assert out.returncode == 1 and "ERROR_LIBRARY_NOT_FOUND" in out.stderr


def test_nvidia_ctk_cdi_generate_describes_each_gpu_and_all(ctk, tmp_path):
    out = ctk("cdi", "generate", "--format=yaml", gpus=["0000:19:00.0", "0000:3b:00.0"])
    assert out.returncode == 0, out.stderr
    assert "kind: nvidia.com/gpu" in out.stdout and "cdiVersion:" in out.stdout
    assert re.findall(r"^  name: (\S+)$", out.stdout, re.M) == ['"0"', '"1"', "all"]
    written = tmp_path / "nvidia.yaml"
    assert ctk("cdi", "generate", f"--output={written}").returncode == 0
    assert written.read_text() == out.stdout


def test_nvidia_ctk_cdi_generate_with_a_driver_but_no_gpu_names_only_all(ctk):
    out = ctk("cdi", "generate", "--format=yaml", gpus=[])
    assert out.returncode == 0, out.stderr
    assert re.findall(r"^  name: (\S+)$", out.stdout, re.M) == ["all"]
    assert "/dev/nvidia0" not in out.stdout


def test_nvidia_ctk_version(ctk):
    out = ctk("--version")
    assert out.returncode == 0 and "NVIDIA Container Toolkit CLI version 1.18.0" in out.stdout


def test_container_runtime_hands_over_to_runc(root, tmp_path):
    path = deb(root, TOOLKIT_DIR, "nvidia-container-toolkit-base", "1.18.0-1")
    assert "runc" in run("dpkg-deb", "--field", str(path), "Depends").stdout
    out = extract(root, tmp_path, ("nvidia-container-toolkit-base", "1.18.0-1"), directory=TOOLKIT_DIR)
    assert 'exec runc "$@"' in (out / "usr/bin/nvidia-container-runtime").read_text()
    toolkit = deb(root, TOOLKIT_DIR, "nvidia-container-toolkit", "1.18.0-1")
    depends = run("dpkg-deb", "--field", str(toolkit), "Depends").stdout
    assert "nvidia-container-toolkit-base (= 1.18.0-1)" in depends
    assert "libnvidia-container-tools (= 1.18.0-1)" in depends


def test_rerun_on_the_same_root_changes_nothing(root, manifest):
    packages = [root / directory / "Packages" for directory in REPO_DIRS]
    before = [path.stat().st_mtime_ns for path in packages]
    assert nvidia_repos.build(root) == manifest
    assert nvidia_repos.main([str(root)]) == 0
    assert [path.stat().st_mtime_ns for path in packages] == before
