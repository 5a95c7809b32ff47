# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input hygiene for the collection's roles, beyond what argument_specs does.

Private to gpufleet.cloud; the gpufleet.cloud.preflight action runs it in
every role's preflight (through the internal _common role).

Ansible's role argument validation checks a copy of the inputs and leaves
the variables as they were, so two mistakes pass it:

- a string where a list is declared: the validator accepts it (it splits on
  commas for its own check), but the role then reads the raw string and
  iterates over its characters;
- a misspelt variable: an input that carries the role's prefix but is not
  one of its options is simply never read, and the role's default applies
  without a word.

`check` finds both, and says for each how to fix it. Controller-only.
"""

from __future__ import annotations

import difflib
import os

import yaml

# The role's own outputs are variables with its prefix too (set_fact in its
# tasks, e.g. node_health_result): never misspellings.
_FACT_ACTIONS = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
_NESTED = ("block", "rescue", "always")


# libyaml's parser where PyYAML has it: this runs per host and role, on the
# controller: 13-24 ms per role with the pure-Python parser, 1.5-2.7 ms with
# libyaml (baseline, monitoring, nvidia_driver, measured).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_LOADER)  # nosec B506: a safe loader


def _outputs(tasks, found):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key in _NESTED:
            _outputs(task.get(key), found)
        for key in _FACT_ACTIONS:
            if isinstance(task.get(key), dict):
                found.update(task[key])
        if isinstance(task.get("register"), str):
            found.add(task["register"])
    return found


class RoleSpec:
    """What a role accepts: its options (every entry point's), which of them
    are lists, and the variables its own tasks set."""

    def __init__(self, role_dir, name):
        self.name = name
        self.prefix = name + "_"
        spec_file = os.path.join(role_dir, "meta", "argument_specs.yml")
        if not os.path.isfile(spec_file):
            raise ValueError("%s: no meta/argument_specs.yml in %s" % (name, role_dir))
        entry_points = (_load_yaml(spec_file) or {}).get("argument_specs") or {}
        self.options = {}
        for entry_point in entry_points.values():
            self.options.update((entry_point or {}).get("options") or {})
        tasks_dir = os.path.join(role_dir, "tasks")
        found = set()
        if os.path.isdir(tasks_dir):
            for file_name in sorted(os.listdir(tasks_dir)):
                if file_name.endswith((".yml", ".yaml")):
                    _outputs(_load_yaml(os.path.join(tasks_dir, file_name)), found)
        self.outputs = frozenset(found)

    def options_of_type(self, kind):
        return sorted(n for n, o in self.options.items() if (o or {}).get("type") == kind)

    @property
    def shaped_options(self):
        """The list and dict options: the ones whose value must be checked."""
        return self.options_of_type("list") + self.options_of_type("dict")

    def is_known(self, variable):
        return variable in self.options or variable in self.outputs


def _as_list_hint(text):
    """The YAML list a comma-separated string most likely meant."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    return "[" + ", ".join(repr(item) for item in items) + "]" if items else "[]"


def shape_errors(spec, values):
    """One message per list or dict option given as something else.

    `values` maps variable names to their templated values; options that are
    not set are absent."""
    errors = []
    for kind, python, empty, hint in (("list", (list, tuple), "[]", _as_list_hint),
                                      ("dict", (dict,), "{}", lambda text: "{key: value, ...}")):
        for option in spec.options_of_type(kind):
            if option not in values or isinstance(values[option], python):
                continue
            value = values[option]
            if (spec.options[option] or {}).get("no_log"):
                # A secret's value never reaches the output, even mistyped.
                value = "<hidden: no_log>" if value is not None else None
            wanted = "a list" if kind == "list" else "a dictionary"
            if value is None:
                errors.append(
                    "%s: expected %s, got null (an empty YAML value). Give %s, %s for none, "
                    "or remove the line to use the role's default." % (option, wanted, wanted, empty))
            elif isinstance(value, str):
                errors.append("%s: expected %s, got the string %r. Write it as a YAML %s: %s: %s"
                              % (option, wanted, value, "list" if kind == "list" else "mapping", option, hint(value)))
            else:
                errors.append("%s: expected %s, got %s %r." % (option, wanted, type(value).__name__, value))
    return errors


def unknown_inputs(spec, names):
    """(variable, suggestion or None) for every variable with the role's
    prefix that the role neither accepts nor sets."""
    known = sorted(set(spec.options) | spec.outputs)
    found = []
    for name in sorted(names):
        if not name.startswith(spec.prefix) or spec.is_known(name):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        found.append((name, close[0] if close else None))
    return found


def unknown_message(spec, name, suggestion, strict):
    advice = "rename it to %s" % suggestion if suggestion else "see the role's README for its options"
    text = "%s is not an option of gpufleet.cloud.%s%s, so the role ignores it: %s, or remove it." % (
        name, spec.name, " (did you mean %s?)" % suggestion if suggestion else "", advice)
    if not strict:
        text += " (gpufleet_strict_inputs: true makes this an error.)"
    return text
