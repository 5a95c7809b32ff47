"""Every step tag works on its own (`--tags <role>_<step>`), which needs two
things of every role's task files, checked here for all roles at once:

- the preflight, which sets the facts the other steps read, is tagged
  `always`, so it runs whatever step is selected;
- a role whose steps read `ansible_facts.packages` outside its install step
  reads them in its preflight in check mode (`_common`'s `preflight`, which
  reads the facts first), since a run limited to another step never
  reaches the install step's read;
- a public role's preflight is one import of `_common`'s, which reads the
  facts, checks the inputs and refreshes the index.

The real runs, each step tag alone in check mode on the converged node,
are every Molecule scenario's side_effect step, after verify
(extensions/molecule/step_tags.yml); this keeps the structure that makes
them pass, and that every scenario has that step after its converge."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
# Every role with a preflight step, internal ones (_kms_client) included;
# not _common, whose preflight.yml is the task file the others import.
STEPPED = sorted(p.parent.parent.name for p in ROOT.glob("roles/*/tasks/main.yml")
                 if p.parent.parent.name != "_common" and (p.parent / "preflight.yml").exists())


def main_tasks(role):
    return yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())


def test_every_role_with_a_preflight_is_checked():
    assert len(STEPPED) >= 13 and "_kms_client" in STEPPED, STEPPED


@pytest.mark.parametrize("role", STEPPED)
def test_the_preflight_runs_for_every_step_tag(role):
    imports = [t for t in main_tasks(role) if t.get("ansible.builtin.import_tasks") == "preflight.yml"]
    assert len(imports) == 1, f"{role}: tasks/main.yml must import preflight.yml once"
    assert imports[0]["tags"][0] == role and "always" in imports[0]["tags"], imports[0]
    # Every other step carries the role's tag and a step tag of its own.
    for task in main_tasks(role):
        tags = task.get("tags", [])
        assert role in tags and any(t.startswith(role + "_") for t in tags), (role, task.get("name"))


@pytest.mark.parametrize("role", STEPPED)
def test_packages_read_in_check_mode_are_read_by_the_preflight(role):
    tasks = ROOT / "roles" / role / "tasks"
    readers = sorted(p.name for p in tasks.glob("*.yml")
                     if p.name not in ("install.yml", "preflight.yml") and "ansible_facts.packages" in p.read_text())
    if not readers:
        pytest.skip(f"{role}: no step outside install reads the installed packages")
    assert _imports_common_preflight(yaml.safe_load((tasks / "preflight.yml").read_text())), (
        f"{role}: {readers} read ansible_facts.packages; its preflight must import gpufleet.cloud._common's "
        "preflight, which reads the facts")


def _imports_common_preflight(tasks):
    """Whether a task list (blocks included) imports _common's preflight,
    which reads the node's facts first."""
    for task in tasks or []:
        imported = task.get("ansible.builtin.import_role") or {}
        if imported.get("name") == "gpufleet.cloud._common" and imported.get("tasks_from") == "preflight":
            return True
        if _imports_common_preflight(task.get("block")):
            return True
    return False


@pytest.mark.parametrize("role", [r for r in STEPPED if r != "_kms_client"])
def test_a_public_roles_preflight_is_one_import_of_commons(role):
    # The facts, the checks and the index refresh: one import, once each.
    text = (ROOT / "roles" / role / "tasks" / "preflight.yml").read_text()
    assert _imports_common_preflight(yaml.safe_load(text)), role
    assert text.count("gpufleet.cloud._common") == 1, f"{role}: import _common once, from its preflight"
    for path in (ROOT / "roles" / role / "tasks").glob("*.yml"):
        assert "tasks_from: apt_index" not in path.read_text() and "tasks_from: facts" not in path.read_text(), (
            f"{path.relative_to(ROOT)}: the preflight already reads the facts and refreshes the index")


SCENARIOS = sorted(p.parent.name for p in ROOT.glob("extensions/molecule/*/molecule.yml") if p.parent.name != "gpu")
# Molecule's base config for every scenario.
MOLECULE_CONFIG = yaml.safe_load((ROOT / "extensions/molecule/config.yml").read_text())


def test_the_shared_side_effect_is_the_step_tag_play():
    assert MOLECULE_CONFIG["provisioner"]["playbooks"]["side_effect"] == "../step_tags.yml"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_runs_the_step_tags_on_its_converged_node(scenario):
    # A scenario with a sequence of its own replaces config.yml's, and with
    # it the step-tag pass: it must keep one side_effect, after converge
    # and before destroy, and no playbook of its own in its place.
    own = yaml.safe_load((ROOT / "extensions/molecule" / scenario / "molecule.yml").read_text()) or {}
    sequence = ((own.get("scenario") or {}).get("test_sequence")
                or MOLECULE_CONFIG["scenario"]["test_sequence"])
    assert sequence.count("side_effect") == 1, (scenario, sequence)
    assert sequence.index("converge") < sequence.index("side_effect") < len(sequence) - 1, (scenario, sequence)
    assert "side_effect" not in ((own.get("provisioner") or {}).get("playbooks") or {}), scenario


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_converges_its_role(scenario):
    # config.yml's converge applies the role the scenario is named after; a
    # scenario with a converge.yml of its own must name it, or Molecule and
    # the step-tag runs (which take the scenario's converge.yml where there
    # is one) would run different plays.
    own = yaml.safe_load((ROOT / "extensions/molecule" / scenario / "molecule.yml").read_text()) or {}
    named = ((own.get("provisioner") or {}).get("playbooks") or {}).get("converge")
    has_own = (ROOT / "extensions/molecule" / scenario / "converge.yml").exists()
    assert (named == "converge.yml") == has_own, (scenario, named, has_own)
    if not has_own:
        assert MOLECULE_CONFIG["provisioner"]["playbooks"]["converge"] == "../shared/converge.yml"
        assert (ROOT / "roles" / scenario / "tasks" / "main.yml").exists(), scenario
