"""Local copies of NVIDIA's apt repositories, for machines that cannot reach NVIDIA.

Reproduces the structure of NVIDIA's repositories with small stand-in
packages, signed with keys generated here:

  ROOT/cuda/<platform>/<x86_64|sbsa>/    the CUDA repository (driver, CUDA,
      NCCL, DCGM), a flat "/" suite, key 3bf863cc.pub, as at
      https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
  ROOT/libnvidia-container/stable/deb/<debarch>/   the container toolkit, as at
      https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH), key at
      ROOT/libnvidia-container/gpgkey, signed with a second key
  ROOT/manifest.json   the keys' fingerprints and each directory's packages

Each repository directory holds the .deb files, Packages, Packages.gz, Release
(SHA256 of both), Release.gpg (detached) and InRelease (clearsigned).

Python 3.11 standard library only, plus dpkg-deb and gpg on PATH. Run as
`python3 nvidia_repos.py ROOT [--arch amd64] [--platforms debian12 debian13]`
or import and call build(). A ROOT that has a manifest is left alone.

The packages are stand-ins: marker files, and small programs where a role or
test runs one (nvidia-smi, nvcc, nvidia-ctk, nvidia-container-runtime,
nv-fabricmanager). They cannot drive a GPU.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

MAINTAINER = "gpufleet tests <tests@gpufleet.invalid>"
PLATFORMS = ("debian12", "debian13")
# NVIDIA's directory per Debian architecture in the CUDA repository.
CUDA_ARCH_DIRS = {"amd64": "x86_64", "arm64": "sbsa"}
MULTIARCH = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
CUDA_KEY_FILE = "3bf863cc.pub"
TOOLKIT_DIR = "libnvidia-container/stable/deb"
MANIFEST = "manifest.json"
DEB_COMPRESSION = ["-Zgzip", "-z1"]


@dataclass
class Package:
    name: str
    version: str
    summary: str
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    replaces: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    source: str = ""
    section: str = "multiverse/devel"
    # path -> (content, mode); a content starting with "->" is a symlink.
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    postinst: str = ""
    prerm: str = ""

    @property
    def filename(self) -> str:
        # dpkg's file names leave the epoch out.
        return f"{self.name}_{self.version.split(':', 1)[-1]}_{{arch}}.deb"


def _marker(name: str) -> dict[str, tuple[str, int]]:
    return {f"/usr/share/doc/{name}/gpufleet-test-stand-in": (f"{name}: gpufleet test stand-in\n", 0o644)}


def _pkg(name: str, version: str, summary: str, **kwargs) -> Package:
    package = Package(name, version, summary, **kwargs)
    package.files = _marker(name) | package.files
    return package


def _exact(name: str, version: str) -> str:
    return f"{name} (= {version})"


def _script(body: str) -> tuple[str, int]:
    return (body, 0o755)


# --- NVIDIA driver ---------------------------------------------------------
# NVIDIA Driver Installation Guide
# (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/):
# the Debian packages nvidia-open / cuda-drivers and their per-branch
# nvidia-open-<branch> / cuda-drivers-<branch>, nvidia-kernel-open-dkms /
# nvidia-kernel-dkms, nvidia-driver-cuda, libcuda1, libnvidia-ml1; and its
# "Recent updates / Version locking for Ubuntu/Debian 590 and later" section:
# from branch 590 the branch number leaves the names (cuda-drivers-<branch>
# is removed, nvidia-fabricmanager-<branch> becomes nvidia-fabricmanager) and
# nvidia-driver-pinning-<branch> / -<version> lock a branch or a version.
DRIVER_BRANCHES = {"570": "570.195.03", "580": "580.95.05"}
DRIVER_RENAMED = {"590": "590.44.01"}
# The fabric manager: NVIDIA Fabric Manager User Guide
# (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/).
FABRICMANAGER_UNIT = """\
[Unit]
Description=NVIDIA fabric manager service (gpufleet test stand-in)
After=network-online.target

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager

[Install]
WantedBy=multi-user.target
"""
# Records that it was started, then stays up as the real daemon does.
FABRICMANAGER_PROGRAM = """\
#!/bin/sh
echo "$(date -u +%FT%TZ) nv-fabricmanager $*" >>/run/gpufleet-test-fabricmanager.log
exec sleep infinity
"""
# nvidia-persistenced ships with the driver in NVIDIA's repository (a
# package per driver version, with its unit); Driver Persistence,
# https://docs.nvidia.com/deploy/driver-persistence/. The stand-in stays up.
PERSISTENCED_UNIT = FABRICMANAGER_UNIT.replace("fabric manager", "persistence daemon").replace(
    "nv-fabricmanager", "nvidia-persistenced")
PERSISTENCED_PROGRAM = FABRICMANAGER_PROGRAM.replace("fabricmanager", "persistenced").replace(
    "nv-persistenced", "nvidia-persistenced")
# What the real nvidia-smi says in a container without a GPU or a driver.
NVIDIA_SMI = """\
#!/bin/sh
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
Make sure that the latest NVIDIA driver is installed and running."
exit 9
"""
DRIVER_SOURCE = "nvidia-graphics-drivers"
PIN_SOURCES = "src:nvidia-graphics-drivers src:nvidia-open-gpu-kernel-modules src:nvidia-fabricmanager"


def _driver_packages(branch: str, upstream: str, renamed: bool) -> list[Package]:
    v = f"{upstream}-1"
    low = ["libcuda1", "libnvidia-ml1"]
    packages = [
        _pkg(
            "nvidia-kernel-open-dkms",
            v,
            "NVIDIA open GPU kernel modules (DKMS)",
            # The real ones build through DKMS, and the driver role reads
            # `dkms status`: dkms comes from the distribution, as there.
            depends=["dkms"],
            conflicts=["nvidia-kernel-dkms"],
            source="nvidia-open-gpu-kernel-modules",
        ),
        _pkg("nvidia-kernel-dkms", v, "NVIDIA kernel modules (DKMS)", depends=["dkms"],
             conflicts=["nvidia-kernel-open-dkms"]),
        _pkg(
            "nvidia-driver-cuda",
            v,
            "NVIDIA driver CUDA integration components, with nvidia-smi",
            depends=[_exact(name, v) for name in (*low, "nvidia-persistenced")],
            files={"/usr/bin/nvidia-smi": _script(NVIDIA_SMI)},
        ),
        _pkg(
            "nvidia-persistenced",
            v,
            "NVIDIA persistence daemon",
            files={
                "/usr/bin/nvidia-persistenced": _script(PERSISTENCED_PROGRAM),
                "/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644),
            },
        ),
        _pkg("libcuda1", v, "NVIDIA CUDA driver library"),
        _pkg("libnvidia-ml1", v, "NVIDIA Management Library (NVML)"),
    ]
    for package in packages:
        package.source = package.source or DRIVER_SOURCE
        package.section = "non-free/libs"
    userspace = [_exact(name, v) for name in ("nvidia-driver-cuda", *low)]
    meta = {
        "nvidia-open": [_exact("nvidia-kernel-open-dkms", v), *userspace],
        "cuda-drivers": [_exact("nvidia-kernel-dkms", v), *userspace],
    }
    for name, depends in meta.items():
        packages.append(_pkg(name, v, "NVIDIA driver metapackage", depends=depends, source=DRIVER_SOURCE))
        if not renamed:
            packages.append(
                _pkg(
                    f"{name}-{branch}", v, f"NVIDIA driver {branch} metapackage", depends=depends, source=DRIVER_SOURCE
                )
            )
    fabricmanager = {
        "/usr/bin/nv-fabricmanager": _script(FABRICMANAGER_PROGRAM),
        "/lib/systemd/system/nvidia-fabricmanager.service": (FABRICMANAGER_UNIT, 0o644),
    }
    if renamed:
        earlier = [f"nvidia-fabricmanager-{b}" for b in DRIVER_BRANCHES]
        packages.append(
            _pkg(
                "nvidia-fabricmanager",
                v,
                "NVIDIA fabric manager for NVSwitch systems",
                conflicts=earlier,
                replaces=earlier,
                source="nvidia-fabricmanager",
                files=fabricmanager,
            )
        )
        for pin, glob in ((branch, f"{branch}.*"), (upstream, f"{upstream}-*")):
            name = f"nvidia-driver-pinning-{pin}"
            preferences = f"Package: {PIN_SOURCES}\nPin: version {glob}\nPin-Priority: 1000\n"
            packages.append(
                _pkg(
                    name,
                    v,
                    f"Locks the NVIDIA driver to {glob}",
                    source="nvidia-driver-pinning",
                    files={f"/etc/apt/preferences.d/{name}": (preferences, 0o644)},
                )
            )
    else:
        # Before 590 each branch has its own name for the same files: one at a time.
        packages.append(
            _pkg(
                f"nvidia-fabricmanager-{branch}",
                v,
                f"NVIDIA fabric manager for NVSwitch systems, branch {branch}",
                provides=["nvidia-fabricmanager"],
                conflicts=["nvidia-fabricmanager"],
                replaces=["nvidia-fabricmanager"],
                source="nvidia-fabricmanager",
                files=fabricmanager,
            )
        )
    return packages


# --- CUDA toolkit ----------------------------------------------------------
# CUDA Installation Guide for Linux
# (https://docs.nvidia.com/cuda/cuda-installation-guide-linux/), its "Meta
# Packages" table: cuda-toolkit-X-Y and the component packages cuda-cudart-X-Y,
# cuda-nvcc-X-Y, cuda-nvrtc-X-Y, libcublas-X-Y, installed under
# /usr/local/cuda-X.Y, with /usr/local/cuda and /usr/local/cuda-X registered
# as update-alternatives; cuda-toolkit-X-Y-config-common,
# cuda-toolkit-X-config-common and cuda-toolkit-config-common are what
# NVIDIA's cuda-cudart-X-Y depends on.
CUDA_TOOLKITS = {"12.8": ("12.8.1", "12.8.93"), "13.0": ("13.0.2", "13.0.88")}
CUDA_COMPONENTS = ("cuda-cudart", "cuda-nvcc", "cuda-nvrtc", "libcublas")


def _nvcc(release: str, compiler: str) -> str:
    return f"""\
#!/bin/sh
case "$1" in
  --version|-V)
    echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Copyright (c) 2005-2025 NVIDIA Corporation"
    echo "Cuda compilation tools, release {release}, V{compiler}"
    exit 0 ;;
esac
echo "nvcc: gpufleet test stand-in, it compiles nothing" >&2
exit 1
"""


def _cuda_packages(release: str, arch: str) -> list[Package]:
    full, compiler = CUDA_TOOLKITS[release]
    major = release.split(".")[0]
    dashed = release.replace(".", "-")
    v = f"{full}-1"
    home = f"/usr/local/cuda-{release}"
    targets = f"{home}/targets/{CUDA_ARCH_DIRS[arch]}-linux"
    priority = release.replace(".", "")
    config = [f"cuda-toolkit-{prefix}config-common" for prefix in (f"{dashed}-", f"{major}-", "")]
    # The real packages register both links, and drop them on removal.
    alternatives = (
        f"update-alternatives --install /usr/local/cuda cuda {home} {priority}\n"
        f"update-alternatives --install /usr/local/cuda-{major} cuda-{major} {home} {priority}\n"
    )
    drop = f"update-alternatives --remove cuda {home}\nupdate-alternatives --remove cuda-{major} {home}\n"
    version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": full}}, indent=2) + "\n"
    packages = [
        _pkg(
            config[0],
            v,
            f"CUDA {release} common configuration",
            files={
                f"{home}/lib64": (f"->targets/{CUDA_ARCH_DIRS[arch]}-linux/lib", 0o777),
                f"{home}/include": (f"->targets/{CUDA_ARCH_DIRS[arch]}-linux/include", 0o777),
                f"{home}/version.json": (version_json, 0o644),
            },
        ),
        _pkg(config[1], v, f"CUDA {major} common configuration"),
        _pkg(config[2], v, "CUDA common configuration"),
        _pkg(
            f"cuda-cudart-{dashed}",
            v,
            f"CUDA runtime {release}",
            depends=config,
            files={
                f"{targets}/lib/libcudart.so.{major}": ("gpufleet test stand-in\n", 0o644),
                f"{targets}/include/cuda_runtime.h": (f"/* gpufleet test stand-in, CUDA {full} */\n", 0o644),
            },
            postinst=f'if [ "$1" = configure ]; then\n{alternatives}fi\n',
            prerm=f'if [ "$1" = remove ]; then\n{drop}fi\n',
        ),
        _pkg(
            f"cuda-nvcc-{dashed}",
            v,
            f"CUDA nvcc {release}",
            depends=[f"cuda-cudart-{dashed}"],
            files={f"{home}/bin/nvcc": _script(_nvcc(release, compiler))},
        ),
        _pkg(
            f"cuda-nvrtc-{dashed}",
            v,
            f"NVRTC {release}",
            depends=[f"cuda-cudart-{dashed}"],
            files={f"{targets}/lib/libnvrtc.so.{major}": ("gpufleet test stand-in\n", 0o644)},
        ),
        _pkg(
            f"libcublas-{dashed}",
            v,
            f"CUBLAS {release}",
            depends=[f"cuda-cudart-{dashed}"],
            files={f"{targets}/lib/libcublas.so.{major}": ("gpufleet test stand-in\n", 0o644)},
        ),
    ]
    packages.append(
        _pkg(
            f"cuda-toolkit-{dashed}",
            v,
            f"CUDA Toolkit {release} meta-package",
            depends=[_exact(f"{c}-{dashed}", v) for c in CUDA_COMPONENTS],
        )
    )
    return packages


# --- NCCL ------------------------------------------------------------------
# NCCL Installation Guide (https://docs.nvidia.com/deeplearning/nccl/install-guide/):
# libnccl2 and libnccl-dev, versioned <nccl>-1+cuda<X.Y>.
NCCL_VERSIONS = {"2.26.2": "12.8", "2.27.7": "13.0"}


def _nccl_packages(nccl: str, cuda: str, arch: str) -> list[Package]:
    v = f"{nccl}-1+cuda{cuda}"
    major, minor, patch = nccl.split(".")
    libdir = f"/usr/lib/{MULTIARCH[arch]}"
    header = (
        f"/* gpufleet test stand-in for NCCL {nccl} */\n#ifndef NCCL_H_\n#define NCCL_H_\n"
        f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n"
        f'#define NCCL_SUFFIX ""\n#define NCCL_VERSION_CODE {int(major) * 10000 + int(minor) * 100 + int(patch)}\n'
        "#endif\n"
    )
    return [
        _pkg(
            "libnccl2",
            v,
            "NVIDIA Collective Communication Library (NCCL) Runtime",
            files={f"{libdir}/libnccl.so.2": ("gpufleet test stand-in\n", 0o644)},
        ),
        _pkg(
            "libnccl-dev",
            v,
            "NVIDIA Collective Communication Library (NCCL) Development Files",
            depends=[_exact("libnccl2", v)],
            files={"/usr/include/nccl.h": (header, 0o644), f"{libdir}/libnccl.so": ("->libnccl.so.2", 0o777)},
        ),
    ]


# --- DCGM ------------------------------------------------------------------
# DCGM User Guide, Getting Started
# (https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html):
# datacenter-gpu-manager-4-core and -4-cuda<major>, epoch 1; the host
# engine runs as the nvidia-dcgm service (`systemctl --now enable
# nvidia-dcgm`) and listens on 127.0.0.1:5555 unless told otherwise
# (nv-hostengine --help: -p 5555, -b localhost). Two versions, so a move
# from one to the other is tested.
DCGM_VERSIONS = ("1:4.2.3-1", "1:4.4.1-1")
DCGM_PORT = 5555
DCGM_UNIT = """\
[Unit]
Description=NVIDIA DCGM service (gpufleet test stand-in)

[Service]
Type=simple
ExecStart=/usr/bin/nv-hostengine -n
Restart=on-abort

[Install]
WantedBy=multi-user.target
"""
# Listens where the real host engine does, answers each connection with its
# version, and records that it was started; -n is "do not daemonise".
NV_HOSTENGINE = f"""\
#!/usr/bin/python3
import socket, sys, time
with open("/run/gpufleet-test-dcgm.log", "a") as log:
    log.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + "nv-hostengine " + " ".join(sys.argv[1:]) + "\\n")
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", {DCGM_PORT}))
server.listen()
while True:
    conn, _ = server.accept()
    conn.sendall(b"gpufleet test stand-in DCGM {{version}}\\n")
    conn.close()
"""


def _dcgm_packages() -> list[Package]:
    core = "datacenter-gpu-manager-4-core"
    return [package for version in DCGM_VERSIONS for package in _dcgm_release(core, version)]


def _dcgm_release(core: str, version: str) -> list[Package]:
    return [
        _pkg(core, version, "NVIDIA Datacenter GPU Manager core", files={
            "/usr/bin/nv-hostengine": _script(NV_HOSTENGINE.replace("{version}", version)),
            "/usr/lib/systemd/system/nvidia-dcgm.service": (DCGM_UNIT, 0o644),
        }),
        *(
            _pkg(
                f"datacenter-gpu-manager-4-cuda{major}",
                version,
                f"NVIDIA Datacenter GPU Manager, CUDA {major} components",
                depends=[_exact(core, version)],
            )
            for major in ("12", "13")
        ),
    ]


# --- Container toolkit -----------------------------------------------------
# NVIDIA Container Toolkit install guide
# (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html):
# nvidia-container-toolkit, nvidia-container-toolkit-base,
# libnvidia-container-tools and libnvidia-container1, all at one version.
TOOLKIT_VERSION = "1.18.0-1"
# Records that dockerd chose it and hands the container to runc.
CONTAINER_RUNTIME = """\
#!/bin/sh
echo "$*" >>/run/gpufleet-test-nvidia-runtime.log
exec runc "$@"
"""
NVIDIA_CTK = r'''#!/usr/bin/python3
"""gpufleet test stand-in for nvidia-ctk: runtime configure, cdi generate, --version."""
import argparse
import json
import os
import sys

VERSION = "@VERSION@"


def configure(args):
    if args.runtime != "docker":
        sys.exit("nvidia-ctk stand-in: only --runtime=docker is emulated")
    path = args.config or "/etc/docker/daemon.json"
    config = {}
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path) as stream:
            config = json.load(stream)
    config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if args.set_as_default:
        config["default-runtime"] = "nvidia"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as stream:
        json.dump(config, stream, indent=4)
        stream.write("\n")
    print('INFO[0000] Wrote updated config to %s' % path, file=sys.stderr)


def gpus():
    # The real one asks NVML, which asks the driver; the stand-in reads the
    # driver's own list, as gpufleet's node facts do. A test points it at
    # a directory of its own with GPUFLEET_TEST_NVIDIA_PROC.
    proc = os.environ.get("GPUFLEET_TEST_NVIDIA_PROC", "/proc/driver/nvidia")
    try:
        return sorted(os.listdir(os.path.join(proc, "gpus")))
    except OSError:
        return None


def generate(args):
    found = gpus()
    if found is None:
        print("ERRO[0000] failed to generate CDI spec: failed to create device CDI specs: "
              "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND", file=sys.stderr)
        sys.exit(1)
    lines = ["---", "cdiVersion: 0.5.0", "containerEdits:", "  deviceNodes:", "  - path: /dev/nvidiactl", "devices:"]
    for index in range(len(found)):
        lines += ["- containerEdits:", "    deviceNodes:", "    - path: /dev/nvidia%d" % index, '  name: "%d"' % index]
    lines += ["- containerEdits:", "    deviceNodes:"]
    lines += ["    - path: /dev/nvidia%d" % index for index in range(len(found))]
    lines += ["  name: all", "kind: nvidia.com/gpu"]
    spec = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w") as stream:
            stream.write(spec)
    else:
        sys.stdout.write(spec)


def main():
    if sys.argv[1:2] in (["--version"], ["-v"]):
        print("NVIDIA Container Toolkit CLI version %s" % VERSION)
        print("commit: gpufleet-test-stand-in")
        return
    parser = argparse.ArgumentParser(prog="nvidia-ctk")
    commands = parser.add_subparsers(dest="command", required=True)
    runtime = commands.add_parser("runtime").add_subparsers(dest="action", required=True)
    configure_parser = runtime.add_parser("configure")
    configure_parser.add_argument("--runtime", default="docker")
    configure_parser.add_argument("--config", default="")
    configure_parser.add_argument("--set-as-default", action="store_true")
    configure_parser.set_defaults(func=configure)
    cdi = commands.add_parser("cdi").add_subparsers(dest="action", required=True)
    generate_parser = cdi.add_parser("generate")
    generate_parser.add_argument("--format", default="yaml", choices=["yaml", "json"])
    generate_parser.add_argument("--output", default="")
    generate_parser.set_defaults(func=generate)
    args = parser.parse_args()
    args.func(args)


main()
'''


def _toolkit_packages() -> list[Package]:
    v = TOOLKIT_VERSION
    upstream = v.split("-", maxsplit=1)[0]
    return [
        _pkg(
            "nvidia-container-toolkit",
            v,
            "NVIDIA Container toolkit",
            depends=[_exact("nvidia-container-toolkit-base", v), _exact("libnvidia-container-tools", v)],
        ),
        _pkg(
            "nvidia-container-toolkit-base",
            v,
            "NVIDIA Container Toolkit Base: nvidia-ctk and nvidia-container-runtime",
            # The stand-in runtime hands containers to runc.
            depends=["runc"],
            files={
                "/usr/bin/nvidia-ctk": _script(NVIDIA_CTK.replace("@VERSION@", upstream)),
                "/usr/bin/nvidia-container-runtime": _script(CONTAINER_RUNTIME),
            },
        ),
        _pkg(
            "libnvidia-container-tools",
            v,
            "NVIDIA container runtime library (command-line tools)",
            depends=[f"libnvidia-container1 (>= {v})"],
        ),
        _pkg("libnvidia-container1", v, "NVIDIA container runtime library"),
    ]


def cuda_repo_packages(arch: str) -> list[Package]:
    packages = []
    for branches, renamed in ((DRIVER_BRANCHES, False), (DRIVER_RENAMED, True)):
        for branch, upstream in branches.items():
            packages += _driver_packages(branch, upstream, renamed)
    for release in CUDA_TOOLKITS:
        packages += _cuda_packages(release, arch)
    for nccl, cuda in NCCL_VERSIONS.items():
        packages += _nccl_packages(nccl, cuda, arch)
    return packages + _dcgm_packages()


# --- Building --------------------------------------------------------------


def _control(package: Package, arch: str, installed_kib: int) -> str:
    fields = [
        ("Package", package.name),
        ("Source", package.source),
        ("Version", package.version),
        ("Architecture", arch),
        ("Maintainer", MAINTAINER),
        ("Installed-Size", str(installed_kib)),
        ("Depends", ", ".join(package.depends)),
        ("Conflicts", ", ".join(package.conflicts)),
        ("Replaces", ", ".join(package.replaces)),
        ("Provides", ", ".join(package.provides)),
        ("Section", package.section),
        ("Priority", "optional"),
        ("Description", f"gpufleet test stand-in for {package.summary}"),
    ]
    text = "".join(f"{key}: {value}\n" for key, value in fields if value)
    return text + " Not NVIDIA's package: built by tests/emulators/nvidia_repos.py for tests without NVIDIA.\n"


def _build_deb(package: Package, arch: str, out: Path, work: Path) -> tuple[Path, str]:
    tree = Path(tempfile.mkdtemp(dir=work))
    tree.chmod(0o755)
    sums, size = [], 0
    for path, (content, mode) in sorted(package.files.items()):
        target = tree / path.lstrip("/")
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if content.startswith("->"):
            target.symlink_to(content[2:])
            continue
        data = content.encode()
        target.write_bytes(data)
        target.chmod(mode)
        size += len(data)
        sums.append(f"{hashlib.md5(data, usedforsecurity=False).hexdigest()}  {path.lstrip('/')}\n")
    debian = tree / "DEBIAN"
    debian.mkdir(mode=0o755)
    control = _control(package, arch, max(1, (size + 1023) // 1024))
    (debian / "control").write_text(control)
    (debian / "md5sums").write_text("".join(sums))
    for script, body in (("postinst", package.postinst), ("prerm", package.prerm)):
        if body:
            (debian / script).write_text(f"#!/bin/sh\nset -e\n{body}")
            (debian / script).chmod(0o755)
    deb = out / package.filename.format(arch=arch)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", *DEB_COMPRESSION, "--build", str(tree), str(deb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(tree)
    return deb, control


def _index_entry(control: str, deb: Path) -> str:
    data = deb.read_bytes()
    head, _sep, description = control.partition("Description:")
    return (
        f"{head}Filename: ./{deb.name}\nSize: {len(data)}\n"
        f"MD5sum: {hashlib.md5(data, usedforsecurity=False).hexdigest()}\n"
        f"SHA256: {hashlib.sha256(data).hexdigest()}\nDescription:{description}\n"
    )


def _gpg(gnupghome: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["gpg", "--batch", "--quiet", "--homedir", str(gnupghome), *args],
        check=True,
        capture_output=True,
        **kwargs,
    )


def _new_key(gnupghome: Path, uid: str) -> str:
    _gpg(gnupghome, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    listing = _gpg(gnupghome, "--with-colons", "--list-keys", uid, text=True).stdout
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def _write_repo(directory: Path, entries: list[str], arch: str, label: str, gnupghome: Path, key: str) -> None:
    packages = "".join(entries).encode()
    (directory / "Packages").write_bytes(packages)
    (directory / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    sums = "".join(
        f" {hashlib.sha256((directory / name).read_bytes()).hexdigest()} {(directory / name).stat().st_size} {name}\n"
        for name in ("Packages", "Packages.gz")
    )
    release = (
        f"Origin: gpufleet test mirror\nLabel: {label}\nArchitectures: {arch}\n"
        f"Date: {formatdate(usegmt=True)}\nSHA256:\n{sums}"
    )
    (directory / "Release").write_text(release)
    sign = ("--local-user", key, "--yes", "--output")
    _gpg(gnupghome, *sign, str(directory / "InRelease"), "--clearsign", str(directory / "Release"))
    _gpg(gnupghome, *sign, str(directory / "Release.gpg"), "--armor", "--detach-sign", str(directory / "Release"))


def _publish(
    directories: list[Path], packages: list[Package], arch: str, label: str, gnupghome: Path, key: str, work: Path
) -> None:
    """Build the packages once and lay them out, indexed and signed, in each directory."""
    pool_dir = Path(tempfile.mkdtemp(dir=work))
    with ThreadPoolExecutor(max_workers=max(4, os.cpu_count() or 1)) as pool:
        built = list(pool.map(lambda p: _build_deb(p, arch, pool_dir, work), packages))
    for directory in directories:
        directory.mkdir(parents=True, exist_ok=True)
        entries = []
        for deb, control in built:
            shutil.copy2(deb, directory / deb.name)
            entries.append(_index_entry(control, directory / deb.name))
        _write_repo(directory, entries, arch, label, gnupghome, key)


def build(root: str | os.PathLike, arch: str = "amd64", platforms: tuple[str, ...] | list[str] = PLATFORMS) -> dict:
    """Build the repositories under root and return the manifest; a root that
    already has a manifest is left as it is and its manifest returned."""
    root = Path(root)
    manifest_path = root / MANIFEST
    if manifest_path.exists():
        return json.loads(manifest_path.read_text())
    if arch not in CUDA_ARCH_DIRS:
        raise ValueError(f"arch {arch!r}: one of {', '.join(CUDA_ARCH_DIRS)}")
    # A build that stopped half way left no manifest: start again.
    for part in ("cuda", "libnvidia-container"):
        shutil.rmtree(root / part, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpufleet-repos-"))
    gnupghome = work / "gnupg"
    gnupghome.mkdir(mode=0o700)
    try:
        keys = {
            "cuda": _new_key(gnupghome, "gpufleet test CUDA repository <cuda@gpufleet.invalid>"),
            "libnvidia-container": _new_key(gnupghome, "gpufleet test libnvidia-container <toolkit@gpufleet.invalid>"),
        }
        cuda_dirs = [root / "cuda" / platform / CUDA_ARCH_DIRS[arch] for platform in platforms]
        toolkit_dir = root / TOOLKIT_DIR / arch
        cuda_packages, toolkit_packages = cuda_repo_packages(arch), _toolkit_packages()
        _publish(cuda_dirs, cuda_packages, arch, "NVIDIA CUDA", gnupghome, keys["cuda"], work)
        toolkit_key = keys["libnvidia-container"]
        _publish([toolkit_dir], toolkit_packages, arch, "libnvidia-container", gnupghome, toolkit_key, work)
        key_files = {
            "cuda": [directory / CUDA_KEY_FILE for directory in cuda_dirs],
            "libnvidia-container": [root / "libnvidia-container" / "gpgkey"],
        }
        for name, files in key_files.items():
            armoured = _gpg(gnupghome, "--armor", "--export", keys[name]).stdout
            for path in files:
                path.write_bytes(armoured)
    finally:
        subprocess.run(["gpgconf", "--homedir", str(gnupghome), "--kill", "gpg-agent"], check=False)
        shutil.rmtree(work, ignore_errors=True)
    listed = {d: cuda_packages for d in cuda_dirs} | {toolkit_dir: toolkit_packages}
    manifest = {
        "keys": {
            name: {
                "fingerprint": keys[name].upper(),
                "file": str(files[0].relative_to(root)),
                "files": [str(path.relative_to(root)) for path in files],
            }
            for name, files in key_files.items()
        },
        "packages": {
            str(directory.relative_to(root)): [[p.name, p.version] for p in packages]
            for directory, packages in listed.items()
        },
    }
    partial = manifest_path.with_suffix(".partial")
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    partial.rename(manifest_path)
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("root", help="where to build (left alone if it has a manifest.json)")
    parser.add_argument("--arch", default="amd64", choices=sorted(CUDA_ARCH_DIRS))
    parser.add_argument("--platforms", nargs="+", default=list(PLATFORMS))
    args = parser.parse_args(argv)
    start = time.monotonic()
    existed = (Path(args.root) / MANIFEST).exists()
    manifest = build(args.root, arch=args.arch, platforms=args.platforms)
    count = sum(len(packages) for packages in manifest["packages"].values())
    verb = "kept" if existed else f"built in {time.monotonic() - start:.1f} s:"
    print(f"{args.root}: {verb} {count} packages in {len(manifest['packages'])} repositories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
