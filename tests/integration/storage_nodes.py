"""Test nodes for the encrypted_storage and backup roles.

Nodes that need a KMS or an S3 server started by the test on the host's
127.0.0.1 run with slirp4netns and allow_host_loopback: they keep their own
network namespace and see the host's loopback as 10.0.2.2. Nodes that use
loop devices are privileged; a privileged container sees every device of
the host, so the roles and these tests only ever touch loop devices backed
by files they created, named after the node, and ``node()`` detaches those
(and only those) when it removes the node, even after a failure."""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.nodes import PODMAN_CONNECTION, node_exec, recap, run_playbook

HOST_LOOPBACK = "10.0.2.2"


def unavailable(reason: str):
    # In CI a missing prerequisite is a broken setup, never a silent skip.
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def detach_loops_of(name: str) -> list[str]:
    """Detach the loop devices whose backing file carries the node's name."""
    out = subprocess.run(["losetup", "--list", "--json"], capture_output=True, text=True, check=False).stdout
    detached = []
    for dev in json.loads(out or '{"loopdevices": []}').get("loopdevices", []):
        if name in (dev.get("back-file") or ""):
            subprocess.run(["losetup", "--detach", dev["name"]], check=False)
            detached.append(dev["name"])
    return detached


@contextlib.contextmanager
def node(image: str = "localhost/gpufleet-debian:12", *, privileged: bool = False, host_loopback: bool = True):
    if not shutil.which("podman"):
        unavailable("podman is not installed")
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
        unavailable(f"{image} is missing: run `make images`")
    name = f"gpufleet-test-{uuid.uuid4().hex[:8]}"
    argv = ["podman", "run", "-d", "--name", name, "--hostname", name]
    if privileged:
        argv.append("--privileged")
    if host_loopback:
        argv += ["--network", "slirp4netns:allow_host_loopback=true"]
    subprocess.run(argv + [image, "/sbin/init"], check=True, capture_output=True)
    try:
        node_exec(name, "systemctl", "is-system-running", "--wait")
        trust_host_cas(name)
        yield name
    finally:
        # Stop first: systemd stops the volume units, which lock the volumes
        # and detach their loop devices the clean way.
        subprocess.run(["podman", "stop", "-t", "20", name], check=False, capture_output=True)
        subprocess.run(["podman", "rm", "-f", "-t", "2", name], check=False, capture_output=True)
        detach_loops_of(name)


def _registry_clouds():
    # The collection's registry of clouds, read from its file: the lab tests
    # do not put the checkout on the collection path.
    path = Path(__file__).resolve().parents[2] / "plugins/module_utils/_clouds.py"
    spec = importlib.util.spec_from_file_location("gpufleet_clouds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLOUDS


# Every provider _kms_client knows: the snapshot below carries all their SDKs.
KMS_PROVIDERS = _registry_clouds()


def _build_kms_sdk_image(base: str, image: str) -> None:
    with node(base) as name:
        rc, out, stats = apply_role(name, "gpufleet.cloud._kms_client", {"_kms_client_providers": list(KMS_PROVIDERS)})
        assert rc == 0 and stats.get("failed") == 0, out[-4000:]
        # Nodes started from the image get their own machine id at boot.
        sh(name, ": > /etc/machine-id")
        subprocess.run(["podman", "commit", "--quiet", name, image], check=True, capture_output=True)


def _image_exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def _count(path: str) -> int:
    try:
        with open(path) as handle:
            return int(handle.read() or 0)
    except FileNotFoundError:
        return 0


def _set_count(path: str, count: int) -> None:
    with open(path, "w") as handle:
        handle.write(str(count))


@contextlib.contextmanager
def _locked(path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def kms_sdk_image(shared_dir, base: str = "localhost/gpufleet-debian:12"):
    """A node image with _kms_client converged once for every provider (the
    SDKs' venv, python3-venv, the gpufleet-kms helper), made with `podman
    commit`; removed afterwards. Yields the image's name.

    The storage and backup tests whose subject is their own role start from
    it instead of installing the SDKs from PyPI on every node; _kms_client
    still runs in each of their converges and finds nothing to install.
    Its first install is proven where it is the subject: the
    encrypted_storage and backup Molecule scenarios, on Debian 12 and 13.

    One image per test run, shared by its pytest workers: the first worker
    that asks builds it under a lock in ``shared_dir`` (a directory every
    worker of the run sees), the others wait and reuse it, and the last to
    finish removes it. A worker that asks after the image was removed
    builds it again, so no ordering of workers loses it."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)[:12]
    image = f"localhost/gpufleet-test-kms:{run_id}"
    lock, users = os.path.join(shared_dir, "kms-image.lock"), os.path.join(shared_dir, "kms-image.users")
    with _locked(lock):
        if not _image_exists(image):
            _build_kms_sdk_image(base, image)
        _set_count(users, _count(users) + 1)
    try:
        yield image
    finally:
        with _locked(lock):
            count = _count(users) - 1
            _set_count(users, count)
            if count <= 0:
                subprocess.run(["podman", "rmi", "-f", image], check=False, capture_output=True)


def trust_host_cas(name: str) -> None:
    """Roles install the KMS SDKs from PyPI through this machine's egress,
    which may present its own CA: give the node the CAs the host added, and
    point pip at the system bundle."""
    extra = sorted(glob.glob("/usr/local/share/ca-certificates/*.crt"))
    for cert in extra:
        subprocess.run(["podman", "cp", cert, f"{name}:/usr/local/share/ca-certificates/"], check=True)
    for _attempt in range(3):
        updated = node_exec(name, "update-ca-certificates")
        # Trusted means in the bundle pip reads: check each CA's body is there.
        bundle = node_exec(name, "cat", "/etc/ssl/certs/ca-certificates.crt").stdout
        if updated.returncode == 0 and all(_body(cert) in bundle for cert in extra):
            break
    else:
        raise AssertionError(f"{name}: the host's CAs did not reach the node's bundle: {updated.stdout}{updated.stderr}")
    node_exec(name, "sh", "-c", "printf '[global]\\ncert = /etc/ssl/certs/ca-certificates.crt\\n' > /etc/pip.conf")


def _body(cert_path: str) -> str:
    """A PEM certificate's base64 body, as one string (bundles rewrap nothing,
    but compare bodies, not headers or trailing whitespace)."""
    with open(cert_path) as handle:
        lines = [line.strip() for line in handle if line.strip() and not line.startswith("-----")]
    return "\n".join(lines[:3])


def apply_role(name: str, role: str | tuple[str, ...], variables: dict, *extra: str,
               env: dict[str, str] | None = None):
    """Run one role (or several, in one play) on the node; returns
    (returncode, output, recap of the node). ``env`` adds to
    ansible-playbook's environment."""
    roles = (role,) if isinstance(role, str) else role
    play = "- hosts: all\n  gather_facts: true\n  roles:\n" + "".join(f"    - {r}\n" for r in roles)
    path = f"/tmp/{name}-{uuid.uuid4().hex[:6]}.yml"
    with open(path, "w") as handle:
        handle.write(play)
    try:
        result = run_playbook("-i", f"{name},", "-c", PODMAN_CONNECTION, "-e", json.dumps(variables), *extra, path,
                              env=env)
    finally:
        os.unlink(path)
    out = result.stdout + result.stderr
    return result.returncode, out, recap(result.stdout).get(name, {})


def put(name: str, source, dest: str) -> None:
    """Copy a file of this machine onto the node."""
    subprocess.run(["podman", "cp", str(source), f"{name}:{dest}"], check=True, capture_output=True)


def sh(name: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    result = node_exec(name, "/bin/sh", "-c", script)
    if check:
        assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
    return result


SEARCH = r"""
import base64, os, sys
needles = [bytes.fromhex(h) for h in sys.argv[1:]]
forms = []
for key in needles:
    forms += [key, key.hex().encode(), key.hex().upper().encode(), base64.b64encode(key)]
hits = []
skip = ("/proc", "/sys", "/dev", "/run/udev")
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
    for f in files:
        path = os.path.join(root, f)
        try:
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if any(form in data for form in forms):
            hits.append(path)
print("\n".join(hits))
"""


def files_containing(name: str, *keys: bytes) -> list[str]:
    """Every file on the node (the loop files included) holding any key in
    raw, hex or base64 form. The keys travel as hex arguments of this one
    podman exec: they reach the node's process table, never its disk."""
    result = node_exec(name, "python3", "-c", SEARCH, *(k.hex() for k in keys))
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def sha256_of(name: str, path: str, length: int | None = None) -> str:
    cmd = f"head -c {length} {path} | sha256sum" if length else f"sha256sum {path}"
    return sh(name, cmd).stdout.split()[0]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
