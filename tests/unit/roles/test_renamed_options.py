"""A role's switches renamed to say what they do
(_role_inputs.OPTIONS_RENAMED, for example guard_idle to guard_idle_enabled):
the new name is the documented option and the old one is not; for one
release the role's default for the new name is the old one's value where a
play still sets it, else the documented default; the preflight names the
new name instead of calling the old one unknown; and nothing else in the
collection reads the old name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _role_inputs

ROOT = Path(__file__).resolve().parents[3]
ROLES = sorted((p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists()),
               key=len, reverse=True)
RENAMES = sorted(_role_inputs.OPTIONS_RENAMED.items())


def role_of(name: str) -> str:
    return next(role for role in ROLES if name.startswith(role + "_"))


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


@pytest.mark.parametrize("old, new", RENAMES)
def test_the_new_name_is_documented_and_the_old_one_is_not(old, new):
    role = role_of(new)
    assert role_of(old) == role, (old, new)
    spec = _role_inputs.RoleSpec(str(ROOT / "roles" / role), role)
    assert spec.is_known(new) and not spec.is_known(old)
    documented = _yaml(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"][new]
    assert documented["type"] == "bool"
    text = documented["description"]
    assert f"Called C({old}) before" in (" ".join(text) if isinstance(text, list) else text)
    # Not an unknown variable, even under gpufleet_strict_inputs: the new name, with advice.
    assert _role_inputs.unknown_inputs(spec, [old]) == []
    assert _role_inputs.renamed_inputs(spec, [old, new]) == [(old, new)]
    assert _role_inputs.renamed_message(old, new) == (
        f"{old} is renamed: use {new} ({old} is still read in this release, where {new} is not set).")


@pytest.mark.parametrize("old, new", RENAMES)
def test_the_old_name_is_still_read_where_the_new_one_is_not_set(old, new):
    role = role_of(new)
    default = _yaml(ROOT / "roles" / role / "defaults" / "main.yml")[new]
    documented = _yaml(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"][new]

    def render(**variables):
        return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(default))

    if documented.get("default") is None:
        # guard_spot_enabled: the inventory's spot flag, where nothing else is set.
        assert render(gpufleet_spot=True) is True and render(gpufleet_spot=False) is False and render() is False
        shipped = False
    else:
        shipped = documented["default"]
        assert render() is shipped
    assert render(**{old: not shipped}) is (not shipped)
    assert render(**{old: shipped}) is shipped


def _readers(names, keep: set[str]) -> list[str]:
    """The tracked lines outside `keep` that name one of `names` as a word.
    Changelogs keep history, and the options' own documentation names the
    old names; docs/test-times.md, written by `make test`, names the tests
    of this module with their parameters. A step tag may share an old name
    (security_firewall, monitoring_gpu_exporter): tags are not variables."""
    found = subprocess.run(["git", "grep", "-nwE", "|".join(names), "--", ".",
                            ":!changelogs", ":!roles/*/meta/argument_specs.yml", ":!roles/*/README.md",
                            ":!docs/test-times.md"],
                           cwd=ROOT, capture_output=True, text=True, check=False)
    assert found.returncode in (0, 1), found.stderr
    return [line for line in found.stdout.splitlines() if line.split(":", 1)[0] not in keep and "tags: [" not in line]


def test_nothing_but_the_defaults_reads_an_old_name():
    # The rename's own tests name the old names.
    keep = {"roles/%s/defaults/main.yml" % role_of(new) for _old, new in RENAMES} | {
        "plugins/plugin_utils/_role_inputs.py", "tests/unit/roles/test_renamed_options.py",
        "tests/unit/plugins/action/test_preflight.py",
        # Sets the old backup_rclone on purpose: the real run that proves it is still read.
        "extensions/molecule/backup/molecule.yml"}
    assert _readers([old for old, _new in RENAMES], keep) == []


MOVES = sorted(_role_inputs.OPTIONS_MOVED.items())


@pytest.mark.parametrize("old, new", MOVES)
def test_a_moved_option_is_documented_where_it_went_and_both_roles_name_it(old, new):
    before = role_of(old)
    before_spec = _role_inputs.RoleSpec(str(ROOT / "roles" / before), before)
    assert not before_spec.is_known(old) and not before_spec.is_known(new)
    specs = [before_spec]
    if new.startswith("gpufleet_"):
        # A fleet setting: checked by every role's preflight, not one role's option.
        assert new in _role_inputs.FLEET
    else:
        after = role_of(new)
        assert after != before, (old, new)
        after_spec = _role_inputs.RoleSpec(str(ROOT / "roles" / after), after)
        assert after_spec.is_known(new) and not after_spec.is_known(old)
        text = _yaml(ROOT / "roles" / after / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"][new]
        assert f"C({old})" in " ".join(text["description"]), (old, new)
        specs.append(after_spec)
    # Each role the option was or is in names the new name, and neither calls it unknown.
    for s in specs:
        assert _role_inputs.renamed_inputs(s, [old, new]) == [(old, new)], s.prefix
        assert _role_inputs.unknown_inputs(s, [old]) == []


@pytest.mark.parametrize("old, new", [(o, n) for o, n in MOVES if not n.startswith("gpufleet_")])
def test_a_moved_options_new_default_reads_the_old_name_where_it_is_set(old, new):
    role = role_of(new)
    default = _yaml(ROOT / "roles" / role / "defaults" / "main.yml")[new]
    documented = _yaml(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"][new]

    def render(**variables):
        facts = {"default_ipv4": {"address": "10.0.0.5"}}
        return Templar(loader=DataLoader(), variables={"ansible_facts": facts, **variables}).template(
            trust_as_template(default))

    shipped = documented.get("default", "10.0.0.5")  # the address: the node's, as node_exporter's
    assert render() == shipped
    other = {bool: lambda v: not v, int: lambda v: v + 1, str: lambda v: v + "-old",
             list: lambda v: v + ["0" * 40]}[type(shipped)](shipped)
    assert render(**{old: other}) == other


def test_the_fleet_gpu_exporter_reads_the_monitoring_roles_old_option():
    # Both roles that read the setting resolve it the same way.
    for role in ("monitoring", "dcgm"):
        resolved = _yaml(ROOT / "roles" / role / "vars" / "main.yml")[f"__{role}_gpu_exporter"]

        def render(resolved=resolved, **variables):
            return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(resolved))

        assert render() == "nvidia_smi"
        assert render(monitoring_gpu_exporter="dcgm") == "dcgm"
        assert render(monitoring_gpu_exporter="dcgm", gpufleet_gpu_exporter="none") == "none"


def test_nothing_but_the_new_homes_reads_a_moved_name():
    # README.md documents the move.
    keep = {"README.md", "roles/dcgm/defaults/main.yml", "roles/dcgm/vars/main.yml", "roles/monitoring/vars/main.yml",
            "roles/cloud_agent/defaults/main.yml",
            # Sets the old monitoring_cloud_agent on purpose: a real run that proves it is still read.
            "tests/integration/roles/cloud_agent/test_bad_input.py",
            "plugins/plugin_utils/_role_inputs.py", "tests/unit/roles/test_renamed_options.py"}
    assert _readers([old for old, _new in MOVES], keep) == []
