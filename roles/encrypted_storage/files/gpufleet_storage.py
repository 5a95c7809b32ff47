# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet-storage: a KMS-keyed volume on the node.

    gpufleet-storage prepare NAME   format a blank volume with the KMS data key
    gpufleet-storage unlock NAME    decrypt the key through KMS, open, mount
    gpufleet-storage lock NAME      unmount and close
    gpufleet-storage verify NAME    prove that the KMS key opens the volume
    gpufleet-storage status NAME    JSON: locked or not

NAME's settings are in /etc/gpufleet/storage/NAME.json (written by the
gpufleet.cloud.encrypted_storage role). The data key exists in this
process's memory only: cryptsetup reads it on standard input, and fscrypt
from a memfd (anonymous memory) because it insists on a 32-byte file. It is
never written to a file, an argument or the journal."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpufleet_kms._kms_envelope import KmsError  # noqa: E402 pylint: disable=wrong-import-position
from gpufleet_kms_cli import decrypt_with_retries  # noqa: E402 pylint: disable=wrong-import-position

CONFIG_DIR = "/etc/gpufleet/storage"


class StorageError(Exception):
    pass


# No tool the helper runs (cryptsetup, fscrypt, mount) should take minutes;
# one that does must fail the unit with a message, not hang the boot.
TOOL_TIMEOUT = 300


def default_run(argv, stdin=None, pass_fds=()):
    try:
        return subprocess.run(argv, input=stdin, pass_fds=pass_fds, capture_output=True, check=False,
                              timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        message = "%s did not finish within %ds" % (argv[0], TOOL_TIMEOUT)
        return subprocess.CompletedProcess(argv, 124, b"", message.encode())


def text(result):
    return (result.stderr or b"").decode("utf-8", "replace").strip() or (result.stdout or b"").decode("utf-8", "replace").strip()


class Volume:
    """One volume from its JSON settings. ``run`` and ``kms`` are injectable
    so the logic is testable without block devices or a KMS."""

    def __init__(self, config, run=default_run, kms=decrypt_with_retries, log=None, proc_misc="/proc/misc"):
        self.cfg = config
        self.name = config["name"]
        self.run = run
        self.kms = kms
        self.log = log or (lambda message: sys.stderr.write("gpufleet-storage %s: %s\n" % (self.name, message)))
        self.proc_misc = proc_misc

    # -- helpers -----------------------------------------------------------
    def _check(self, argv, what, stdin=None, pass_fds=()):
        result = self.run(argv, stdin=stdin, pass_fds=pass_fds)
        if result.returncode != 0:
            raise StorageError("%s failed: %s" % (what, text(result)))
        return result

    def key(self):
        try:
            key = self.kms(self.cfg["envelope"], self.cfg.get("retries", 5), self.cfg.get("retry_delay", 5), self.log,
                           self.cfg.get("credentials_file"))
        except KmsError as exc:
            raise StorageError("KMS could not decrypt the data key, so the volume stays locked: %s" % exc)
        self.log("KMS decrypted the data key (%s)" % self.cfg["envelope"])
        return key

    def device(self):
        loop_file = self.cfg.get("loop_file")
        if not loop_file:
            device = self.cfg["device"]
            if not os.path.exists(device):
                raise StorageError("the device %s does not exist" % device)
            return device
        if not os.path.exists(loop_file):
            # Sparse: a test volume costs only what is written to it.
            with open(loop_file, "ab") as handle:
                handle.truncate(int(self.cfg["loop_size"]))
            os.chmod(loop_file, 0o600)
        attached = self.run(["losetup", "--noheadings", "--output", "NAME", "--associated", loop_file]).stdout
        attached = (attached or b"").decode().split()
        if attached:
            return attached[0]
        return self._check(["losetup", "--find", "--show", loop_file], "losetup").stdout.decode().strip()

    def detach(self):
        loop_file = self.cfg.get("loop_file")
        if not loop_file:
            return
        out = self.run(["losetup", "--noheadings", "--output", "NAME", "--associated", loop_file]).stdout
        for loop in (out or b"").decode().split():
            self._check(["losetup", "--detach", loop], "losetup --detach")

    def signature(self, device):
        result = self.run(["blkid", "--probe", "--output", "value", "--match-tag", "TYPE", device])
        # blkid exits 2 when it finds no signature at all: a blank device.
        if result.returncode == 2:
            return ""
        if result.returncode != 0:
            raise StorageError("blkid %s failed: %s" % (device, text(result)))
        return result.stdout.decode().strip()

    def mounted(self, path=None):
        path = os.path.realpath(path or self.cfg["mount_point"])
        with open("/proc/self/mountinfo") as handle:
            return any(line.split()[4] == path for line in handle)

    def mount(self, source):
        if self.mounted():
            return False
        if not os.path.isdir(self.cfg["mount_point"]):
            os.makedirs(self.cfg["mount_point"], 0o755)
        self._check(["mount", "-o", self.cfg.get("mount_options", "defaults"), source, self.cfg["mount_point"]], "mount")
        return True

    def umount(self):
        if self.mounted():
            self._check(["umount", self.cfg["mount_point"]], "umount")

    def dm_available(self):
        # /dev/mapper/control can exist (a privileged container sees the
        # host's /dev) while the kernel has no device-mapper: ask the kernel.
        try:
            with open(self.proc_misc) as handle:
                return any(line.split()[1:] == ["device-mapper"] for line in handle if line.strip())
        except (IOError, OSError):
            return False

    # -- LUKS2 -------------------------------------------------------------
    def _luks_test(self, device, key):
        result = self.run(["cryptsetup", "open", "--test-passphrase", "--key-file=-", device], stdin=key)
        if result.returncode != 0:
            raise StorageError(
                "the data key from KMS opens no keyslot of %s (wrong key or envelope?); the volume stays locked: %s"
                % (device, text(result))
            )
        self.log("the data key from KMS opens a LUKS2 keyslot of %s" % device)

    def _mapper(self):
        return "/dev/mapper/%s" % self.name

    def luks_prepare(self):
        device = self.device()
        kind = self.signature(device)
        if kind == "crypto_LUKS":
            self._luks_test(device, self.key())
            return []
        if kind:
            raise StorageError("%s holds a %s signature; refusing to format it" % (device, kind))
        key = self.key()
        argv = ["cryptsetup", "luksFormat", "--type", "luks2", "--batch-mode", "--key-file=-"]
        argv += ["--pbkdf", self.cfg.get("luks_pbkdf", "pbkdf2")]
        if self.cfg.get("luks_pbkdf", "pbkdf2") == "pbkdf2":
            # The key is 256 random bits from KMS: key stretching adds no
            # strength, only boot time, so the fewest iterations allowed.
            argv += ["--pbkdf-force-iterations", "1000"]
        self._check(argv + [device], "cryptsetup luksFormat", stdin=key)
        self._luks_test(device, key)
        return ["luksFormat %s" % device]

    def luks_unlock(self):
        if os.path.exists(self._mapper()) and self.mounted():
            self.log("already open and mounted on %s" % self.cfg["mount_point"])
            return
        device = self.device()
        key = self.key()
        self._luks_test(device, key)
        if not os.path.exists(self._mapper()):
            if not self.dm_available():
                raise StorageError(
                    "this kernel has no device-mapper (no device-mapper in %s): the key is right, but %s cannot be "
                    "opened here; the volume stays locked" % (self.proc_misc, device)
                )
            self._check(["cryptsetup", "open", "--type", "luks2", "--key-file=-", device, self.name],
                        "cryptsetup open", stdin=key)
        if not self.signature(self._mapper()):
            self._check(["mkfs.ext4", "-q", "-L", self.name[:16], self._mapper()], "mkfs.ext4")
            self.log("made an ext4 file system inside the new LUKS2 volume")
        self.mount(self._mapper())
        self.log("unlocked and mounted on %s" % self.cfg["mount_point"])

    def luks_lock(self):
        self.umount()
        if os.path.exists(self._mapper()):
            self._check(["cryptsetup", "close", self.name], "cryptsetup close")
        self.detach()
        self.log("locked")

    def luks_locked(self):
        return not os.path.exists(self._mapper())

    # -- fscrypt -----------------------------------------------------------
    def _fscrypt_with_key(self, argv, key, what):
        """Run fscrypt with the raw key in a memfd: fscrypt wants a file of
        exactly 32 bytes (a pipe has no size), and a memfd is memory, not disk."""
        fd = os.memfd_create("gpufleet-key", 0)
        try:
            os.write(fd, key)
            os.lseek(fd, 0, os.SEEK_SET)
            return self.run(argv + ["--key=/dev/fd/%d" % fd], pass_fds=(fd,))
        finally:
            os.close(fd)

    def fscrypt_state(self):
        """'none' (not encrypted), 'locked' or 'unlocked'."""
        result = self.run(["fscrypt", "status", self.cfg["fscrypt_dir"]])
        out = (result.stdout or b"").decode()
        if result.returncode != 0:
            # fscrypt wraps its messages at the terminal width: compare words.
            if "is not encrypted" in " ".join(text(result).split()):
                return "none"
            raise StorageError("fscrypt status failed: %s" % text(result))
        return "unlocked" if "Unlocked: Yes" in out else "locked"

    def fscrypt_mount(self, create=False):
        device = self.device()
        actions = []
        kind = self.signature(device)
        if not kind and not create:
            raise StorageError("%s is blank; run the role (gpufleet-storage prepare) to create it" % device)
        if not kind:
            self._check(["mkfs.ext4", "-q", "-O", "encrypt", "-L", self.name[:16], device], "mkfs.ext4")
            actions.append("mkfs.ext4 -O encrypt %s" % device)
        elif kind != "ext4":
            raise StorageError("%s holds a %s file system; fscrypt needs ext4" % (device, kind))
        features = self._check(["dumpe2fs", "-h", device], "dumpe2fs").stdout.decode()
        if "encrypt" not in next((line for line in features.splitlines() if line.startswith("Filesystem features")), ""):
            self._check(["tune2fs", "-O", "encrypt", device], "tune2fs -O encrypt")
            actions.append("tune2fs -O encrypt %s" % device)
        if self.mount(device):
            actions.append("mount %s" % self.cfg["mount_point"])
        return actions

    def fscrypt_prepare(self):
        actions = self.fscrypt_mount(create=True)
        if not os.path.exists("/etc/fscrypt.conf"):
            self._check(["fscrypt", "setup", "--force", "--quiet"], "fscrypt setup")
            actions.append("fscrypt setup")
        if not os.path.isdir(os.path.join(self.cfg["mount_point"], ".fscrypt")):
            self._check(["fscrypt", "setup", self.cfg["mount_point"], "--force", "--quiet"], "fscrypt setup (file system)")
            actions.append("fscrypt setup %s" % self.cfg["mount_point"])
        directory = self.cfg["fscrypt_dir"]
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        if self.fscrypt_state() == "none":
            if os.listdir(directory):
                raise StorageError("%s is not empty; fscrypt only encrypts an empty directory" % directory)
            key = self.key()
            argv = ["fscrypt", "encrypt", directory, "--source=raw_key", "--name=gpufleet-%s" % self.name, "--quiet"]
            result = self._fscrypt_with_key(argv, key, "fscrypt encrypt")
            if result.returncode != 0:
                raise StorageError("fscrypt encrypt failed: %s" % text(result))
            actions.append("fscrypt encrypt %s" % directory)
        return actions

    def fscrypt_unlock(self):
        self.fscrypt_mount()
        if self.fscrypt_state() == "unlocked":
            self.log("%s is already unlocked" % self.cfg["fscrypt_dir"])
            return
        key = self.key()
        # --quiet: with a wrong key, fscrypt otherwise asks again, forever,
        # printing its prompt to a pipe nobody answers.
        result = self._fscrypt_with_key(["fscrypt", "unlock", self.cfg["fscrypt_dir"], "--quiet"], key, "fscrypt unlock")
        if result.returncode != 0:
            raise StorageError(
                "the data key from KMS does not unlock %s (wrong key or envelope?); it stays locked: %s"
                % (self.cfg["fscrypt_dir"], text(result))
            )
        self.log("unlocked %s" % self.cfg["fscrypt_dir"])

    def fscrypt_lock(self):
        if self.mounted() and self.fscrypt_state() == "unlocked":
            self._check(["fscrypt", "lock", self.cfg["fscrypt_dir"]], "fscrypt lock")
        self.umount()
        self.detach()
        self.log("locked")

    # -- commands ----------------------------------------------------------
    def prepare(self):
        return self.luks_prepare() if self.cfg["backend"] == "luks" else self.fscrypt_prepare()

    def unlock(self):
        return self.luks_unlock() if self.cfg["backend"] == "luks" else self.fscrypt_unlock()

    def lock(self):
        return self.luks_lock() if self.cfg["backend"] == "luks" else self.fscrypt_lock()

    def verify(self):
        key = self.key()
        if self.cfg["backend"] == "luks":
            self._luks_test(self.device(), key)

    def status(self):
        if self.cfg["backend"] == "luks":
            locked = self.luks_locked()
        else:
            locked = not self.mounted() or self.fscrypt_state() != "unlocked"
        return {"name": self.name, "backend": self.cfg["backend"], "locked": locked, "mounted": self.mounted(),
                "device_mapper": self.dm_available()}


def load(name, config_dir=CONFIG_DIR):
    path = os.path.join(config_dir, "%s.json" % name)
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise StorageError("cannot read %s: %s" % (path, exc))


def main(argv=None, volume_factory=None):
    parser = argparse.ArgumentParser(prog="gpufleet-storage", description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("command", choices=["prepare", "unlock", "lock", "verify", "status"])
    parser.add_argument("name")
    args = parser.parse_args(argv)
    started = time.time()
    try:
        volume = volume_factory(args.name) if volume_factory else Volume(load(args.name))
        if args.command == "prepare":
            actions = volume.prepare()
            print(json.dumps({"changed": bool(actions), "actions": actions}))
        elif args.command == "status":
            print(json.dumps(volume.status()))
        else:
            getattr(volume, args.command)()
    except StorageError as exc:
        sys.stderr.write("gpufleet-storage %s: %s failed after %.1fs: %s\n" % (args.name, args.command, time.time() - started, exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
