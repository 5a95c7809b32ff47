"""Fingerprints computed from key files that gpg made, compared with what
gpg itself prints for them: the code under test never sees gpg's answer."""

from __future__ import annotations

import os
import subprocess

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _openpgp


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}

    def gpg(*args):
        return subprocess.run(["gpg", "--batch", "--quiet", *args], env=env, check=True, capture_output=True).stdout

    # An ed25519 key with an encryption subkey, and an RSA one (NVIDIA's is RSA 4096).
    gpg("--passphrase", "", "--quick-gen-key", "ed <ed@gpufleet.invalid>", "ed25519", "sign", "never")
    gpg("--passphrase", "", "--quick-gen-key", "rsa <rsa@gpufleet.invalid>", "rsa2048", "sign", "never")
    fprs = [line.split(":")[9] for line in gpg("--with-colons", "--list-keys").decode().splitlines()
            if line.startswith("fpr:")]
    primaries = [fprs[0], fprs[-1]] if len(fprs) == 2 else fprs
    files = {
        "ed.asc": gpg("--armor", "--export", "ed@gpufleet.invalid"),
        "rsa.gpg": gpg("--export", "rsa@gpufleet.invalid"),
        "both.asc": gpg("--armor", "--export"),
    }
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False)
    return files, primaries


def test_fingerprints_match_what_gpg_prints(keys):
    files, primaries = keys
    assert _openpgp.primary_fingerprints(files["ed.asc"]) == [primaries[0]]
    assert _openpgp.primary_fingerprints(files["rsa.gpg"]) == [primaries[1]]
    assert _openpgp.primary_fingerprints(files["both.asc"]) == primaries


@pytest.mark.parametrize("data, why", [
    (b"", "empty"),
    (b"<html>404</html>", "neither a binary key"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!not base64!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "base64"),
    (b"\x99\x01\xff\x04", "past the end"),
    (b"\xb4\x03abc", "no public key"),  # a user ID packet alone
])
def test_what_is_not_a_key_is_refused(data, why):
    with pytest.raises(_openpgp.KeyFileError, match=why):
        _openpgp.primary_fingerprints(data)


def test_a_truncated_armoured_key_is_refused(keys):
    files = keys[0]
    text = files["ed.asc"].decode()
    lines = text.splitlines()
    cut = "\n".join(lines[:4] + lines[-1:]) + "\n"
    with pytest.raises(_openpgp.KeyFileError):
        _openpgp.primary_fingerprints(cut.encode())


@pytest.mark.parametrize("given, want", [
    ("EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("0xeb693b3035cd5710e231e123a4b469963bf863cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("3BF863CC", None),  # a short key ID is not a fingerprint: ID collisions are cheap
    ("EB693B3035CD5710E231E123A4B469963BF863CG", None),
    ("", None),
])
def test_normalise(given, want):
    assert _openpgp.normalise(given) == want
