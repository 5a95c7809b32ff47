from __future__ import annotations

import hashlib
import importlib.util
import json
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("install_collections", ROOT / "tools" / "install-collections.py")
ic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ic)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A project tree with requirements and a cached wheel bundling a.b 1.0.0."""
    (tmp_path / "requirements").mkdir()
    wheel = tmp_path / ".cache" / "wheels" / f"ansible-{ic.ANSIBLE_VERSION}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("ansible_collections/a/b/MANIFEST.json", json.dumps({"collection_info": {"version": "1.0.0"}}))
        zf.writestr("ansible_collections/a/b/plugins/modules/m.py", "# module\n")
        zf.writestr("ansible_collections/c/d/MANIFEST.json", json.dumps({"collection_info": {"version": "9"}}))
    monkeypatch.setattr(ic, "ROOT", tmp_path)
    monkeypatch.setattr(ic, "REQUIREMENTS", tmp_path / "requirements" / "collections.yml")
    monkeypatch.setattr(ic, "DEST", tmp_path / ".collections")
    monkeypatch.setattr(ic, "CACHE", wheel.parent)
    monkeypatch.setattr(ic, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    return tmp_path


def write_requirements(root: Path, version: str) -> None:
    (root / "requirements" / "collections.yml").write_text(f"collections:\n  - name: a.b\n    version: {version}\n")


def test_installs_only_the_listed_collections_then_is_a_no_op(fake, capsys):
    write_requirements(fake, "1.0.0")
    assert ic.main() == 0
    assert (fake / ".collections/ansible_collections/a/b/plugins/modules/m.py").exists()
    assert not (fake / ".collections/ansible_collections/c").exists()
    assert ic.main() == 0
    assert "up to date" in capsys.readouterr().out


def test_a_version_the_wheel_does_not_bundle_names_the_collection(fake):
    write_requirements(fake, "2.0.0")
    with pytest.raises(SystemExit, match="pins a.b 2.0.0, but ansible .* bundles 1.0.0"):
        ic.main()
    assert not (fake / ".collections").exists(), "nothing is half-installed"


def test_a_tampered_wheel_is_refused(fake, monkeypatch):
    write_requirements(fake, "1.0.0")
    monkeypatch.setattr(ic, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(SystemExit, match="sha256 mismatch"):
        ic.main()
