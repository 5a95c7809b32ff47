"""Make this checkout importable as ansible_collections.gpufleet.cloud.

collections/ holds the link that names the checkout gpufleet.cloud (see
ansible.cfg); putting it on sys.path lets tests import the collection's
plugins and module_utils by the same names Ansible uses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

if str(ROOT / "collections") not in sys.path:
    sys.path.insert(0, str(ROOT / "collections"))


@pytest.fixture
def fixture_text():
    def read(*parts: str) -> str:
        return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")

    return read
