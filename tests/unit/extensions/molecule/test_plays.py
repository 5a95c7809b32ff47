"""The Molecule plays that reach the nodes run through Mitogen, as the
project's ansible.cfg sets it: the converges, and the node plays of every
prepare and cleanup. Over the podman connection without it, every task is
a few `podman exec` calls (docs/testing.md, "Molecule"). Not the gpu
scenario's, which runs on the GPU machine itself (a local connection)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
MOLECULE = ROOT / "extensions" / "molecule"
MITOGEN = "gpufleet.cloud.mitogen_linear"
PLAYBOOKS = sorted(p for name in ("converge.yml", "prepare.yml", "cleanup.yml") for p in MOLECULE.glob(f"*/{name}")
                   if p.parent.name != "gpu")


def node_plays(path: Path) -> list[dict]:
    """The plays of `path` that run on a node: not an imported playbook,
    not one on the host."""
    plays = yaml.safe_load(path.read_text()) or []
    return [p for p in plays if "hosts" in p and p["hosts"] != "localhost"]


def test_every_scenario_s_plays_are_found():
    assert len(PLAYBOOKS) >= 20 and MOLECULE / "shared" / "converge.yml" in PLAYBOOKS, PLAYBOOKS
    assert sum(len(node_plays(p)) for p in PLAYBOOKS) >= len(PLAYBOOKS)


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: str(p.relative_to(MOLECULE)))
def test_node_plays_run_through_mitogen(path):
    for play in node_plays(path):
        assert play.get("strategy") == MITOGEN, f"{path.relative_to(ROOT)}: play {play.get('name')!r}"
