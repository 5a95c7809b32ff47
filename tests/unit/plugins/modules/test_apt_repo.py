"""gpufleet.cloud.apt_repo against a repository in a directory (file://
URLs), with keys gpg generated: a key is written only when its fingerprint
is pinned, a mirror's own key or an extra key is refused, and missing
packages or versions are named with the versions the repository has."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import apt_repo
from tests.support.ports import REFUSED_URL

INDEX = """Package: nvidia-open-570
Version: 570.195.03-1
Architecture: amd64

Package: nvidia-open-580
Version: 580.82.07-1

Package: nvidia-open-580
Version: 580.95.05-1
Description: a long
 description: with a colon
"""


def _key(home, uid):
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign",
                    "never"], env=env, check=True)
    out = subprocess.run(["gpg", "--batch", "--armor", "--export", uid], env=env, check=True,
                         capture_output=True).stdout
    fpr = [line.split(":")[9] for line in subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-keys", uid], env=env, check=True, capture_output=True,
        text=True).stdout.splitlines() if line.startswith("fpr:")][0]
    return out, fpr


def _publish(directory, home, index_name, index, signer=None, *, detached=False, listed=None):
    """A flat repository in `directory`: the index, a Release that lists the
    SHA256 of `listed` (the index itself unless given), signed by `signer`
    (InRelease, or Release.gpg when `detached`), or unsigned."""
    directory.mkdir(exist_ok=True)
    (directory / index_name).write_bytes(index)
    digest = hashlib.sha256(index if listed is None else listed).hexdigest()
    (directory / "Release").write_text("Origin: test\nLabel: test\nSHA256:\n %s %d %s\n" % (
        digest, len(index), index_name))
    if signer:
        env = {**os.environ, "GNUPGHOME": str(home)}
        how = ["--armor", "--detach-sign", "-o", "Release.gpg"] if detached else ["--clearsign", "-o", "InRelease"]
        subprocess.run(["gpg", "--batch", "--quiet", "--local-user", signer, *how, "Release"], cwd=directory, env=env,
                       check=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    real, real_fpr = _key(home, "real <real@gpufleet.invalid>")
    other, other_fpr = _key(home, "proxy <proxy@gpufleet.invalid>")
    (root / "real.pub").write_bytes(real)
    (root / "other.pub").write_bytes(other)
    (root / "both.pub").write_bytes(real + other)
    packed = gzip.compress(INDEX.encode())
    _publish(root, home, "Packages.gz", packed, real_fpr)
    _publish(root / "plain", home, "Packages", INDEX.encode(), real_fpr, detached=True)
    _publish(root / "broken", home, "Packages.gz", b"not gzip", real_fpr)
    _publish(root / "foreign", home, "Packages.gz", packed, other_fpr)
    _publish(root / "unsigned", home, "Packages.gz", packed)
    # The index changed after the Release was signed: a sync caught half-way.
    _publish(root / "stale", home, "Packages.gz", packed, real_fpr, listed=gzip.compress(b"Package: old\n"))
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(home)}, check=False)
    return {"root": root, "real": real_fpr, "other": other_fpr}


def run(capsys, check=False, **params):
    with patch_module_args({"_ansible_check_mode": check, "_ansible_diff": True, **params}), \
            pytest.raises(SystemExit):
        apt_repo.main()
    return json.loads(capsys.readouterr().out)


def url(repo, name=""):
    return "file://%s/%s" % (repo["root"], name)


def test_pinned_key_is_written_once_then_unchanged(repo, capsys, tmp_path):
    dest = tmp_path / "keyrings" / "nvidia.asc"
    args = {"key_url": url(repo, "real.pub"), "key_fingerprints": [repo["real"]], "key_dest": str(dest)}
    checked = run(capsys, check=True, **args)
    assert checked["changed"] and not dest.exists()
    assert checked["diff"]["after"].strip() == repo["real"]
    assert run(capsys, **args)["changed"]
    assert dest.read_bytes() == (repo["root"] / "real.pub").read_bytes()
    assert oct(dest.stat().st_mode & 0o777) == "0o644"
    assert not run(capsys, **args)["changed"]
    assert not run(capsys, check=True, **args)["changed"]


def test_a_substituted_key_is_refused_and_nothing_is_written(repo, capsys, tmp_path):
    dest = tmp_path / "nvidia.asc"
    out = run(capsys, key_url=url(repo, "other.pub"), key_fingerprints=[repo["real"]], key_dest=str(dest),
              fingerprint_var="nvidia_driver_repo_key_fingerprints", url_var="nvidia_driver_mirror_url")
    assert out["failed"] and not dest.exists()
    assert repo["other"] in out["msg"] and repo["real"] in out["msg"]
    assert "nvidia_driver_repo_key_fingerprints" in out["msg"]


def test_an_extra_key_next_to_the_pinned_one_is_refused(repo, capsys):
    out = run(capsys, key_url=url(repo, "both.pub"), key_fingerprints=[repo["real"]])
    assert out["failed"] and repo["other"] in out["msg"]
    assert sorted(out["fingerprints"]) == sorted([repo["real"], repo["other"]])


def test_the_users_own_key_for_a_mirror_is_accepted(repo, capsys):
    spaced = " ".join(repo["other"][i:i + 4] for i in range(0, 40, 4)).lower()
    out = run(capsys, key_url=url(repo, "other.pub"), key_fingerprints=[spaced])
    assert not out.get("failed") and out["fingerprints"] == [repo["other"]]


@pytest.mark.parametrize("bad", [["3BF863CC"], ["not hex"], []])
def test_a_malformed_pin_names_the_variable(repo, capsys, bad):
    out = run(capsys, key_url=url(repo, "real.pub"), key_fingerprints=bad, fingerprint_var="cuda_repo_key_fingerprints")
    assert out["failed"] and out["msg"].startswith("cuda_repo_key_fingerprints:")


def test_an_unreachable_key_names_the_url_variable(repo, capsys):
    out = run(capsys, key_url=f"{REFUSED_URL}/3bf863cc.pub", key_fingerprints=[repo["real"]],
              url_var="nccl_mirror_url", timeout=5)
    assert out["failed"] and out["msg"].startswith("nccl_mirror_url:") and "cannot be fetched" in out["msg"]


def test_a_page_that_is_not_a_key_is_refused(repo, capsys):
    out = run(capsys, key_url=url(repo, "plain/Packages"), key_fingerprints=[repo["real"]])
    assert out["failed"] and "not an OpenPGP public key" in out["msg"]


@pytest.mark.parametrize("where", ["", "plain/"])
def test_wanted_versions_present(repo, capsys, where):
    out = run(capsys, url=url(repo, where), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]],
              packages=[{"name": "nvidia-open-580", "version": "580.95.05*"}, {"name": "nvidia-open-570"}])
    assert not out.get("failed"), out
    assert out["versions"]["nvidia-open-580"] == ["580.82.07-1", "580.95.05-1"]
    assert out["signed_by"] == repo["real"]


@pytest.mark.parametrize("package, version, says", [
    ("nvidia-open-600", "600.10.01*", "nvidia-open-600 is not in it"),
    ("nvidia-open-580", "580.99.99*", "nvidia-open-580 has no version 580.99.99* (it has 580.82.07-1, 580.95.05-1)"),
])
def test_a_missing_branch_or_version_is_named(repo, capsys, package, version, says):
    out = run(capsys, url=url(repo), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]],
              packages=[{"name": package, "version": version}], version_var="nvidia_driver_version")
    assert out["failed"] and out["msg"].startswith("nvidia_driver_version:") and says in out["msg"]


@pytest.mark.parametrize("where, says", [("missing/", "cannot be read"), ("broken/", "not gzip data")])
def test_an_unreadable_index_names_the_repository(repo, capsys, where, says):
    out = run(capsys, url=url(repo, where), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]],
              packages=[{"name": "nvidia-open-580"}], url_var="nvidia_driver_mirror_url")
    assert out["failed"] and out["msg"].startswith("nvidia_driver_mirror_url:") and says in out["msg"]


@pytest.mark.parametrize("key, where", [
    # The mirror's key URL serves the user's own key, pinned, but the
    # repository is still signed by the original key.
    ("other", ""),
    # The pinned key is served, but the repository was re-signed by another.
    ("real", "foreign/"),
])
def test_a_repository_not_signed_by_the_pinned_key_is_refused(repo, capsys, key, where):
    signer = "real" if key == "other" else "other"
    out = run(capsys, url=url(repo, where), key_url=url(repo, key + ".pub"), key_fingerprints=[repo[key]],
              packages=[{"name": "nvidia-open-580"}], url_var="nvidia_driver_mirror_url",
              fingerprint_var="nvidia_driver_repo_key_fingerprints")
    assert out["failed"] and out["msg"].startswith("nvidia_driver_mirror_url:"), out
    assert "not signed by the key pinned in nvidia_driver_repo_key_fingerprints" in out["msg"]
    assert "signed by key %s, which is not the pinned key" % repo[signer][-16:] in out["msg"]


def test_the_signature_is_checked_without_packages_too(repo, capsys):
    out = run(capsys, url=url(repo, "foreign/"), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]])
    assert out["failed"] and "not the pinned key" in out["msg"]
    out = run(capsys, url=url(repo), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]])
    assert not out.get("failed") and out["signed_by"] == repo["real"] and "versions" not in out


def test_an_unsigned_repository_is_refused(repo, capsys):
    out = run(capsys, url=url(repo, "unsigned/"), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]],
              packages=[{"name": "nvidia-open-580"}], url_var="cuda_mirror_url", fingerprint_var="cuda_repo_key_fingerprints")
    assert out["failed"] and out["msg"].startswith("cuda_mirror_url:") and "is not signed" in out["msg"]
    assert "cuda_repo_key_fingerprints" in out["msg"]


def test_an_index_the_signed_release_does_not_list_is_refused(repo, capsys):
    out = run(capsys, url=url(repo, "stale/"), key_url=url(repo, "real.pub"), key_fingerprints=[repo["real"]],
              packages=[{"name": "nvidia-open-580"}], url_var="nccl_mirror_url")
    assert out["failed"] and out["msg"].startswith("nccl_mirror_url:"), out
    assert "Packages.gz that its signed Release does not list" in out["msg"] and "Sync it again" in out["msg"]
