"""Install the collections in requirements/collections.yml without Galaxy.

Galaxy is unreachable from our machines, but PyPI is, and the `ansible`
package on PyPI bundles the collections we need. We download that one wheel
(pinned by version and sha256), unpack only the listed collections into
.collections/ansible_collections, and check that each bundled version is the
one requirements/collections.yml asks for, so the two never disagree silently.

Idempotent: a stamp records what was installed; nothing is done when it
matches.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

ANSIBLE_VERSION = "12.3.0"
WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements" / "collections.yml"
DEST = ROOT / ".collections"
CACHE = ROOT / ".cache" / "wheels"


def wanted() -> dict[str, str]:
    data = yaml.safe_load(REQUIREMENTS.read_text())
    return {c["name"]: str(c["version"]) for c in data["collections"]}


def fetch_wheel() -> Path:
    wheel = CACHE / f"ansible-{ANSIBLE_VERSION}-py3-none-any.whl"
    if not wheel.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--dest", str(CACHE), f"ansible=={ANSIBLE_VERSION}"],
            check=True,
        )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        wheel.unlink()
        sys.exit(f"install-collections: sha256 mismatch for {wheel.name}: {digest}")
    return wheel


def main() -> int:
    want = wanted()
    stamp = DEST / ".installed.json"
    record = {"ansible": ANSIBLE_VERSION, "collections": want}
    if stamp.exists() and json.loads(stamp.read_text()) == record:
        print("install-collections: up to date")
        return 0

    wheel = fetch_wheel()
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        for name, version in want.items():
            ns, coll = name.split(".")
            prefix = f"ansible_collections/{ns}/{coll}/"
            members = [m for m in zf.namelist() if m.startswith(prefix)]
            if not members:
                sys.exit(f"install-collections: {name} is not bundled in ansible {ANSIBLE_VERSION}")
            manifest = json.loads(zf.read(prefix + "MANIFEST.json"))
            bundled = manifest["collection_info"]["version"]
            if bundled != version:
                sys.exit(
                    f"install-collections: requirements/collections.yml pins {name} {version}, "
                    f"but ansible {ANSIBLE_VERSION} bundles {bundled}"
                )
            zf.extractall(tmp, members)
        # Swap in the complete tree at once, so an interrupted run never
        # leaves a half-unpacked collection behind.
        new = Path(tmp) / "ansible_collections"
        if DEST.exists():
            shutil.rmtree(DEST)
        DEST.mkdir()
        new.rename(DEST / "ansible_collections")
    stamp.write_text(json.dumps(record, indent=2) + "\n")
    print("install-collections: installed " + ", ".join(f"{n} {v}" for n, v in want.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
