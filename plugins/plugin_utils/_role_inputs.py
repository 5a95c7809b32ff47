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
import re

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.validation import check_type_bool, check_type_float, check_type_int
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE
from ansible.module_utils.errors import ArgumentTypeError, ArgumentValueError

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
        # The main entry point's options, which the preflight validates.
        self.main = dict(((entry_points.get("main") or {}).get("options")) or {})
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


def _kind(value):
    """What a value is, in words: never a class name (Ansible's values are
    tagged subclasses, _AnsibleTaggedList and the like)."""
    for python, words in ((bool, "true or false"), (int, "a whole number"), (float, "a number"),
                          (str, "a string"), (dict, "a mapping"), ((list, tuple), "a list")):
        if isinstance(value, python):
            return words
    return "a value of another kind"


def _shown(spec, option, value):
    # A secret's value never reaches the output, even mistyped.
    if (spec.options[option] or {}).get("no_log") and value is not None:
        return "<hidden: no_log>"
    return repr(value)


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
            wanted = "a list" if kind == "list" else "a dictionary"
            if value is None:
                errors.append(
                    "%s: expected %s, got null (an empty YAML value). Give %s, %s for none, "
                    "or remove the line to use the role's default." % (option, wanted, wanted, empty))
            elif isinstance(value, str) and not (spec.options[option] or {}).get("no_log"):
                errors.append("%s: expected %s, got the string %r. Write it as a YAML %s, for example %s: %s"
                              % (option, wanted, value, "list" if kind == "list" else "mapping", option, hint(value)))
            else:
                errors.append("%s: expected %s, got %s %s. Write it as a YAML %s, for example %s: %s"
                              % (option, wanted, _kind(value), _shown(spec, option, value),
                                 "list" if kind == "list" else "mapping", option,
                                 "[...]" if kind == "list" else "{key: value, ...}"))
    return errors


# What each scalar type of argument_specs takes, in words, Ansible's own
# conversion for it, and an example where the option's default gives none.
_SCALARS = {
    "int": ("a whole number", check_type_int, "10"),
    "float": ("a number", check_type_float, "0.5"),
    "bool": ("true or false", check_type_bool, "true"),
    "str": ("a string", None, "'text'"),
    "path": ("a path", None, "/srv/data"),
}


def _default_example(option_spec, quote):
    """The option's default as an example, or None where it gives none
    (empty, or a template): YAML's true and false, a string quoted or not."""
    default = option_spec.get("default")
    if default in (None, "", [], {}) or (isinstance(default, str) and "{{" in default):
        return None
    if isinstance(default, bool):
        return str(default).lower()
    return repr(default) if quote and isinstance(default, str) else str(default)


def _example(option_spec, kind):
    choices = option_spec.get("choices")
    if choices:
        return repr(choices[0]) if isinstance(choices[0], str) else str(choices[0]).lower()
    default = _default_example(option_spec, quote=True)
    return _SCALARS[kind][2] if default is None else default


_CLASS = re.compile(r"<class '([A-Za-z_.]+)'>|\b_?Ansible[A-Za-z]*?(List|Dict|Str|Int|Float|Bool)\b")
_CLASS_WORDS = ("list", "dict", "str", "int", "float", "bool")


def _plain(message):
    """Ansible's validator message with no internal class name in it."""
    def words(match):
        name = (match.group(1) or match.group(2) or "").split(".")[-1].lstrip("_").lower()
        for known in _CLASS_WORDS:
            if name.endswith(known):
                return known
        return "value"
    return _CLASS.sub(words, message)


def input_errors(spec, values, fleet=None):
    """What refuses a role's inputs before its own checks, in the order the
    preflight gives it: lists and dicts of another shape, scalars of the
    wrong type or choice, the fleet-wide settings in ``fleet``, and only
    when all of those pass, what else argument_specs says (spec_errors).

    `values` maps the role's options that are set to their templated values."""
    shaped = set(spec.shaped_options)
    errors = (shape_errors(spec, {k: v for k, v in values.items() if k in shaped})
              + type_errors(spec, {k: v for k, v in values.items() if k not in shaped})
              + fleet_errors(fleet or {}))
    return errors or spec_errors(spec, values)


def spec_errors(spec, values):
    """What Ansible's role argument validation says of the main entry
    point's options that type_errors and shape_errors do not cover:
    required options missing, and the elements and suboptions of lists and
    dictionaries (a firewall rule without its port, a protocol outside its
    choices), each without internal class names and with where to look.

    `values` maps the options that are set to their templated values."""
    known = {name: value for name, value in values.items() if name in spec.main}
    result = ArgumentSpecValidator(spec.main).validate(known)
    errors = []
    for error in result.errors:
        text = str(error)
        # A top-level option's type or choice: type_errors and shape_errors
        # say it in the project's words.
        if isinstance(error, (ArgumentTypeError, ArgumentValueError)) and " found in " not in text:
            continue
        named = _FOUND_IN.search(text) or _OPTION_IN.search(text)
        option = next((g for g in (named.groups() if named else ()) if g), "")
        option = option.split(",")[0].strip()
        example = ", for example %s: %s" % (option, example_of(spec.main[option])) if option in spec.main else ""
        errors.append("%s%s." % (_plain(text).rstrip("."), example))
    return errors


# The option an argument_specs error is about: the top-level one, where a
# suboption's error says "found in OPTION".
_FOUND_IN = re.compile(r"found in ([a-z0-9_]+)")
_OPTION_IN = re.compile(r"option '([a-z0-9_]+)'|missing required arguments: ([a-z0-9_, ]+)")
_VALUE = re.compile(r"V\(([^)]+)\)")


def example_of(option_spec):
    """A value the option takes, for advice: the first V(...) of its
    description, else its default, else one of its type."""
    description = option_spec.get("description") or ""
    text = " ".join(description) if isinstance(description, list) else str(description)
    found = _VALUE.search(text)
    kind = option_spec.get("type", "str")
    if found:
        value = found.group(1)
        return value if kind != "list" or value.startswith("[") else "[%s]" % value
    default = _default_example(option_spec, quote=False)
    if default is not None:
        return default
    if kind == "list":
        elements = option_spec.get("elements", "str")
        if elements == "dict" and option_spec.get("options"):
            subs = option_spec["options"]
            keys = [k for k, v in subs.items() if (v or {}).get("required")] or list(subs)[:2]
            return "[{%s}]" % ", ".join("%s: %s" % (k, example_of(subs[k] or {})) for k in keys)
        return "[%s]" % _SCALARS.get(elements, ("", None, "..."))[2]
    if kind == "dict":
        return "{key: value}"
    return _SCALARS.get(kind, ("", None, "..."))[2]


def type_errors(spec, values):
    """One message per scalar option (int, float, bool, str, path) whose
    value that type does not take, or which is not one of its choices, in
    the project's words: the option, what it takes, the value given and an
    example. What Ansible's role argument validation checks, for the
    plays that apply the roles without it (site.yml), whose raw conversion
    errors name internal classes and give no advice.

    `values` maps variable names to their templated values; options that are
    not set are absent. null is left to the role (some options take it)."""
    errors = []
    for option in sorted(values):
        option_spec = spec.options.get(option) or {}
        kind = option_spec.get("type", "str")
        value = values[option]
        if kind not in _SCALARS or value is None:
            continue
        words, convert, _fallback = _SCALARS[kind]
        converted = value
        wrong = False
        if convert is not None:
            try:
                converted = convert(value)
            except (TypeError, ValueError):
                wrong = True
        elif isinstance(value, (dict, list, tuple)):
            wrong = True
        if not wrong and kind in ("int", "float") and isinstance(value, bool):
            wrong = True
        choices = option_spec.get("choices")
        if choices and kind == "str" and str(value) in ("True", "False"):
            # YAML reads a bare no or yes as a boolean: Ansible's validation
            # maps it back where exactly one choice is such a word, and so
            # does this (sshd's PermitRootLogin no).
            words = BOOLEANS_TRUE if str(value) == "True" else BOOLEANS_FALSE
            overlap = [c for c in choices if c in words]
            if len(overlap) == 1:
                converted = overlap[0]
        if wrong:
            errors.append("%s must be %s (got %s %s), for example %s: %s."
                          % (option, words, _kind(value), _shown(spec, option, value), option,
                             _example(option_spec, kind)))
        elif choices and converted not in choices and str(converted) not in [str(c) for c in choices]:
            errors.append("%s must be one of %s (got %s), for example %s: %s."
                          % (option, ", ".join(str(c) for c in choices), _shown(spec, option, value), option,
                             _example(option_spec, kind)))
    return errors


# Options renamed (the part after the role's prefix), with the variable
# that replaces them. The old name is still read for one release: the role
# passes it on where the new one is not set, and the preflight warns.
RENAMED = {
    "apt_cache_valid_time": "gpufleet_apt_cache_valid_time",
    # node_exporter's textfile directory, which five roles write to.
    "textfile_dir": "gpufleet_textfile_dir",
    "node_exporter_textfile_dir": "gpufleet_textfile_dir",
}


# A role's switches renamed to say what they do (<thing>_enabled, or a
# verb phrase), full names. The old name is still read for one release:
# the role's default for the new one is the old one's value where that is
# set (defaults/main.yml), and the preflight warns.
OPTIONS_RENAMED = {
    "backup_rclone": "backup_rclone_enabled",
    "baseline_time_sync": "baseline_time_sync_enabled",
    "cuda_profile": "cuda_profile_enabled",
    "cuda_ldconfig": "cuda_ldconfig_enabled",
    "guard_spot": "guard_spot_enabled",
    "guard_idle": "guard_idle_enabled",
    "guard_idle_ssh": "guard_idle_ssh_keeps_busy",
    "guard_stop_instance_role": "guard_stop_uses_instance_role",
    "monitoring_node_exporter": "monitoring_node_exporter_enabled",
    "node_health_persistence_mode": "node_health_persistence_mode_required",
    "node_health_pcie": "node_health_pcie_enabled",
    "node_health_nccl": "node_health_nccl_enabled",
    "node_health_nccl_on_timer": "node_health_nccl_runs_on_timer",
    "nvidia_driver_persistenced": "nvidia_driver_persistenced_enabled",
    "pull_check_mode": "pull_check_mode_enabled",
    "security_sshd": "security_sshd_enabled",
    "security_firewall": "security_firewall_enabled",
    "security_listening_ports_check": "security_listening_ports_check_enabled",
}

# Options moved to another role, or to the fleet's settings, full names:
# read for one release as renamed ones are, and both roles' preflights
# warn. DCGM moved from monitoring to a role of its own (dcgm), and which
# GPU exporter runs became the fleet's, which both roles read.
OPTIONS_MOVED = {
    "monitoring_gpu_exporter": "gpufleet_gpu_exporter",
    "monitoring_dcgm_hostengine": "dcgm_hostengine_enabled",
    "monitoring_dcgm_hostengine_enabled": "dcgm_hostengine_enabled",
    "monitoring_dcgm_source": "dcgm_source",
    "monitoring_dcgm_mirror_url": "dcgm_mirror_url",
    "monitoring_dcgm_repo_key_fingerprints": "dcgm_repo_key_fingerprints",
    "monitoring_dcgm_version": "dcgm_version",
    "monitoring_dcgm_cuda_major": "dcgm_cuda_major",
    "monitoring_dcgm_hold": "dcgm_hold",
    "monitoring_dcgm_exporter_image": "dcgm_exporter_image",
    "monitoring_dcgm_exporter_version": "dcgm_exporter_version",
    "monitoring_dcgm_exporter_address": "dcgm_exporter_address",
    "monitoring_dcgm_exporter_port": "dcgm_exporter_port",
    # The cloud monitoring agents moved from monitoring to cloud_agent.
    "monitoring_cloud_agent": "cloud_agent_name",
    "monitoring_cloud_agent_package_url": "cloud_agent_package_url",
    "monitoring_cloud_agent_package_sha256": "cloud_agent_package_sha256",
    "monitoring_cloudwatch_namespace": "cloud_agent_cloudwatch_namespace",
    "monitoring_huawei_ces_region": "cloud_agent_huawei_ces_region",
    "monitoring_huawei_ces_project_id": "cloud_agent_huawei_ces_project_id",
    "monitoring_huawei_ces_access_key": "cloud_agent_huawei_ces_access_key",
    "monitoring_huawei_ces_secret_key": "cloud_agent_huawei_ces_secret_key",
}


def _renamed_to(spec, name):
    """The new name of `name`, where the role `spec` had it or has it now
    (an option moved to this role from another: both roles' preflights
    warn)."""
    moved = OPTIONS_MOVED.get(name)
    if moved and (name.startswith(spec.prefix) or moved.startswith(spec.prefix)):
        return moved
    if not name.startswith(spec.prefix):
        return None
    return OPTIONS_RENAMED.get(name) or RENAMED.get(name[len(spec.prefix):])


def renamed_inputs(spec, names):
    """(variable, its new name) for every renamed option of the role set."""
    return [(name, _renamed_to(spec, name)) for name in sorted(names) if _renamed_to(spec, name)]


def renamed_message(name, new):
    return ("%s is renamed: use %s%s (%s is still read in this release, where %s is not set)."
            % (name, new, ", one setting for every role" if new.startswith("gpufleet_") else "", name, new))


# Fleet-wide settings every role reads, and what each takes (an example).
FLEET_INTS = {"gpufleet_apt_cache_valid_time": 3600}
FLEET_PATHS = {"gpufleet_textfile_dir": "/var/lib/prometheus/node-exporter"}
# Which GPU exporter runs: the monitoring role's nvidia-smi one, the dcgm
# role's dcgm-exporter, or neither.
FLEET_CHOICES = {"gpufleet_gpu_exporter": ("nvidia_smi", "dcgm", "none")}
FLEET = tuple(FLEET_INTS) + tuple(FLEET_PATHS) + tuple(FLEET_CHOICES)


def fleet_errors(values):
    """A message per fleet-wide setting of the wrong type or range."""
    errors = []
    for name, example in sorted(FLEET_PATHS.items()):
        if name not in values or values[name] is None:
            continue
        value = values[name]
        if not isinstance(value, str) or not value.startswith("/"):
            errors.append("%s must be an absolute path (got %s %r), for example %s: %s."
                          % (name, _kind(value), value, name, example))
    for name, example in sorted(FLEET_INTS.items()):
        if name not in values or values[name] is None:
            continue
        try:
            number = check_type_int(values[name])
        except (TypeError, ValueError):
            number = -1
        if isinstance(values[name], bool) or number < 0:
            errors.append("%s must be 0 or more seconds (got %s %r), for example %s: %s."
                          % (name, _kind(values[name]), values[name], name, example))
    for name, choices in sorted(FLEET_CHOICES.items()):
        if name in values and values[name] is not None and values[name] not in choices:
            errors.append("%s must be one of %s (got %s %r), for example %s: %s."
                          % (name, ", ".join(choices), _kind(values[name]), values[name], name, choices[0]))
    return errors


def unknown_inputs(spec, names):
    """(variable, suggestion or None) for every variable with the role's
    prefix that the role neither accepts nor sets (a renamed one is not
    unknown: see renamed_inputs)."""
    known = sorted(set(spec.options) | spec.outputs)
    found = []
    for name in sorted(names):
        if not name.startswith(spec.prefix) or spec.is_known(name) or _renamed_to(spec, name):
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
