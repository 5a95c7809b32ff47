"""Make this checkout importable as ansible_collections.gpufleet.cloud (the
same link ansible.cfg uses), through Ansible's own collection loader, so
plugin code is tested as Ansible loads it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATHS = [str(ROOT / "collections"), str(ROOT / ".collections")]

from ansible.plugins.loader import init_plugin_loader  # noqa: E402  (after the paths are known)

init_plugin_loader(PATHS)
