"""plugin_utils/_role_inputs.py, against the collection's real roles: lists
and dictionaries given as strings are named with a fix, misspelt role
variables get a did-you-mean, the role's own outputs are never flagged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _role_inputs

ROOT = Path(__file__).resolve().parents[4]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
PUBLIC = [r for r in ROLES if not r.startswith("_")]
# Internal roles: a leading underscore, and their inputs carry it too
# (_common_role, _nvidia_packages_names, _kms_client_providers).
INTERNAL = [r for r in ROLES if r.startswith("_")]


def spec(role):
    return _role_inputs.RoleSpec(str(ROOT / "roles" / role), role)


@pytest.mark.parametrize("role", PUBLIC)
def test_every_role_has_options_and_its_defaults_are_well_shaped(role):
    # Every default in defaults/main.yml passes the role's own check: the
    # check cannot fire on a role used as shipped.
    s = spec(role)
    assert s.options, role
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    # A templated default is checked as what it renders to, at run time.
    defaults = {k: v for k, v in defaults.items() if not (isinstance(v, str) and "{{" in v)}
    assert _role_inputs.shape_errors(s, defaults) == []
    assert _role_inputs.unknown_inputs(s, defaults) == []


@pytest.mark.parametrize("role", INTERNAL)
def test_an_internal_roles_inputs_carry_its_underscore_name(role):
    s = spec(role)
    assert s.prefix == role + "_" and s.prefix.startswith("_")
    assert s.options and all(name.startswith(s.prefix) for name in s.options), sorted(s.options)
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    assert defaults and all(name in s.options for name in defaults), sorted(set(defaults) - set(s.options))
    shipped = {k: v for k, v in defaults.items() if not (isinstance(v, str) and "{{" in v)}
    assert _role_inputs.shape_errors(s, shipped) == []
    # Its private variables (two underscores) never look like its inputs.
    assert _role_inputs.unknown_inputs(s, sorted(s.outputs)) == []


def test_the_prefix_of_an_underscore_role_is_its_whole_name():
    s = spec("_kms_client")
    found = _role_inputs.unknown_inputs(s, [
        "_kms_client_provider",        # misspelt input of the internal role
        "_kms_client_providers",       # its input
        "__kms_client_sdk_packages",   # its private variable (vars/main.yml)
        "kms_client_providers",        # the name before the rename: another prefix
        "encrypted_storage_kms_provider",
    ])
    assert found == [("_kms_client_provider", "_kms_client_providers")]
    assert _role_inputs.unknown_message(s, *found[0], strict=True).startswith(
        "_kms_client_provider is not an option of gpufleet.cloud._kms_client (did you mean _kms_client_providers?)")
    (error,) = _role_inputs.shape_errors(s, {"_kms_client_providers": "aws"})
    assert error.startswith("_kms_client_providers: expected a list, got the string 'aws'")


def test_no_roles_prefix_claims_another_roles_variables():
    # The preflight warns about every variable with the role's prefix that
    # the role does not know: a prefix that another role's options or
    # outputs start with (a role named nvidia beside _nvidia_packages and
    # nvidia_driver would be one) would warn about that role's variables.
    specs = {role: spec(role) for role in ROLES}
    for role, s in specs.items():
        for other, o in specs.items():
            if other != role:
                claimed = sorted(n for n in set(o.options) | o.outputs if n.startswith(s.prefix))
                assert not claimed, f"{role}'s prefix {s.prefix} matches {other}'s {claimed}"


def test_a_string_for_a_list_is_refused_with_the_list_it_meant():
    (error,) = _role_inputs.shape_errors(spec("security"), {"security_ssh_allowed_cidrs": "10.0.0.0/8, 192.168.0.0/16"})
    assert error.startswith("security_ssh_allowed_cidrs: expected a list, got the string '10.0.0.0/8, 192.168.0.0/16'")
    assert "security_ssh_allowed_cidrs: ['10.0.0.0/8', '192.168.0.0/16']" in error


@pytest.mark.parametrize("value, says", [
    (None, "got null"), (3, "got a whole number 3"), ({"a": 1}, "got a mapping {'a': 1}"),
    ("", "Write it as a YAML list, for example baseline_packages: []"),
])
def test_other_non_lists_are_refused(value, says):
    (error,) = _role_inputs.shape_errors(spec("baseline"), {"baseline_packages": value})
    assert "baseline_packages: expected a list" in error and says in error


def test_a_string_for_a_dictionary_is_refused():
    (error,) = _role_inputs.shape_errors(spec("docker"), {"docker_daemon_config": "log-driver=journald"})
    assert error.startswith("docker_daemon_config: expected a dictionary, got the string 'log-driver=journald'")
    assert _role_inputs.shape_errors(spec("docker"), {"docker_daemon_config": None})[0].endswith(
        "Give a dictionary, {} for none, or remove the line to use the role's default.")


def test_a_list_for_a_dictionary_names_no_internal_class():
    # Ansible's own validation says "_AnsibleTaggedList"; a tagged list is
    # still a list in words here.
    from ansible.module_utils._internal._datatag import AnsibleTagHelper  # pylint: disable=import-outside-toplevel
    from ansible._internal._datatag._tags import Origin  # pylint: disable=import-outside-toplevel
    tagged = AnsibleTagHelper.tag(["log-driver", "journald"], [Origin(path="/srv/fleet/group_vars/all.yml")])
    assert type(tagged).__name__.startswith("_Ansible")
    (error,) = _role_inputs.shape_errors(spec("docker"), {"docker_daemon_config": tagged})
    assert error == ("docker_daemon_config: expected a dictionary, got a list ['log-driver', 'journald']. Write it as "
                     "a YAML mapping, for example docker_daemon_config: {key: value, ...}")
    assert "_Ansible" not in error


@pytest.mark.parametrize("option, value, message", [
    # The issue's: a unit in a number of minutes.
    ("backup_rpo_minutes", "15m", "backup_rpo_minutes must be a whole number (got a string '15m'), "
                                  "for example backup_rpo_minutes: 15."),
    ("backup_rclone_enabled", "perhaps", "backup_rclone_enabled must be true or false (got a string 'perhaps'), "
                                         "for example backup_rclone_enabled: false."),
    ("backup_repository_bucket", ["a", "b"], "backup_repository_bucket must be a string (got a list ['a', 'b']), "
                                             "for example backup_repository_bucket: 'text'."),
    ("backup_rpo_minutes", True, "backup_rpo_minutes must be a whole number (got true or false True), "
                                 "for example backup_rpo_minutes: 15."),
    # A secret's value is never shown, even mistyped.
    ("backup_password", {"a": 1}, "backup_password must be a string (got a mapping <hidden: no_log>)"),
    ("backup_s3_secret_access_key", ["wJalrXUt"], "backup_s3_secret_access_key must be a string (got a list "
                                                  "<hidden: no_log>)"),
])
def test_a_scalar_of_the_wrong_type_is_named_in_the_projects_words(option, value, message):
    (error,) = _role_inputs.type_errors(spec("backup"), {option: value})
    assert error.startswith(message), error


@pytest.mark.parametrize("value", [False, "no", "False"])
def test_a_bare_yaml_no_is_the_choice_it_meant_as_ansible_takes_it(value):
    # security_ssh_permit_root_login: no (unquoted) is a boolean in YAML.
    assert _role_inputs.type_errors(spec("security"), {"security_ssh_permit_root_login": value}) == []


def test_a_boolean_no_choice_takes_is_still_refused():
    (error,) = _role_inputs.type_errors(spec("security"), {"security_ssh_permit_root_login": True})
    assert error.startswith("security_ssh_permit_root_login must be one of no, prohibit-password, "
                            "forced-commands-only (got True)"), error


def test_a_value_outside_the_choices_lists_them():
    (error,) = _role_inputs.type_errors(spec("docker"), {"docker_source": "snap"})
    assert error.startswith("docker_source must be one of ") and "(got 'snap'), for example docker_source: " in error


@pytest.mark.parametrize("role", ROLES)
def test_every_roles_defaults_pass_the_type_check(role):
    s = spec(role)
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    # Templated defaults are left out: their value is the play's.
    plain = {k: v for k, v in defaults.items() if k in s.options and not (isinstance(v, str) and "{{" in v)}
    assert _role_inputs.type_errors(s, plain) == []


def test_numbers_given_as_strings_pass_as_ansible_takes_them():
    assert _role_inputs.type_errors(spec("backup"), {"backup_rpo_minutes": "15", "backup_rclone_enabled": "yes"}) == []


def test_lists_and_tuples_pass_and_unset_options_are_not_checked():
    s = spec("baseline")
    assert _role_inputs.shape_errors(s, {"baseline_packages": ["curl"], "baseline_extra_packages": ()}) == []
    assert _role_inputs.shape_errors(s, {}) == []


def test_a_misspelt_variable_gets_the_option_it_meant():
    s = spec("baseline")
    found = _role_inputs.unknown_inputs(s, ["baseline_ntp_server", "baseline_packages", "security_x", "gpufleet_site"])
    assert found == [("baseline_ntp_server", "baseline_ntp_servers")]
    warning = _role_inputs.unknown_message(s, *found[0], strict=False)
    assert warning.startswith("baseline_ntp_server is not an option of gpufleet.cloud.baseline "
                              "(did you mean baseline_ntp_servers?)")
    assert "rename it to baseline_ntp_servers" in warning and "gpufleet_strict_inputs: true" in warning
    assert "gpufleet_strict_inputs" not in _role_inputs.unknown_message(s, *found[0], strict=True)


def test_a_variable_like_no_option_gets_no_wrong_suggestion():
    s = spec("baseline")
    ((name, suggestion),) = _role_inputs.unknown_inputs(s, ["baseline_completely_unrelated_thing"])
    assert suggestion is None
    assert "see the role's README for its options" in _role_inputs.unknown_message(s, name, None, strict=False)


@pytest.mark.parametrize("role, output", [
    ("node_health", "node_health_result"), ("rdma", "rdma_devices"), ("docker", "docker_gpus_found"),
    ("cuda", "cuda_pinned"), ("nvidia_driver", "nvidia_driver_pinned"),
])
def test_the_roles_own_outputs_are_not_misspellings(role, output):
    assert _role_inputs.unknown_inputs(spec(role), [output]) == []


def test_every_entry_point_counts():
    # monitoring's export entry point has options of its own.
    s = spec("monitoring")
    exported = [n for n in s.options if n.startswith("monitoring_export")]
    assert exported and _role_inputs.unknown_inputs(s, exported) == []


def test_a_role_without_argument_specs_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no meta/argument_specs.yml"):
        _role_inputs.RoleSpec(str(tmp_path), "nothing")


@pytest.mark.parametrize("rules, says", [
    ([{"proto": "tcp", "cidrs": ["10.0.0.0/8"]}], "missing required arguments: port found in security_firewall_rules"),
    ([{"port": 8080, "proto": "icmp", "cidrs": ["10.0.0.0/8"]}],
     "value of proto must be one of: tcp, udp, got: icmp found in security_firewall_rules"),
])
def test_suboptions_are_still_validated_without_ansibles_check(rules, says):
    # site.yml applies the roles with rolespec_validate: false; what only
    # argument_specs says of a list's elements is said by the preflight.
    (error,) = _role_inputs.spec_errors(spec("security"), {"security_firewall_rules": rules})
    assert error.startswith(says) and error.endswith(
        ", for example security_firewall_rules: [{port: 8080, cidrs: [10.0.0.0/8]}]."), error


def test_a_missing_required_option_is_named():
    (error,) = _role_inputs.spec_errors(spec("pull"), {})
    assert error.startswith("missing required arguments: pull_repo_url"), error


def test_top_level_types_are_left_to_the_projects_own_messages():
    assert _role_inputs.spec_errors(spec("backup"), {"backup_rpo_minutes": "15m"}) == []


@pytest.mark.parametrize("raw, plain", [
    ("argument 'x' is of type <class '_AnsibleTaggedList'> and we were unable to convert to dict",
     "argument 'x' is of type list and we were unable to convert to dict"),
    ("elements of type _AnsibleTaggedStr found", "elements of type str found"),
])
def test_internal_class_names_become_plain_words(raw, plain):
    assert _role_inputs._plain(raw) == plain  # pylint: disable=protected-access


def test_a_renamed_option_is_still_read_and_named_with_its_new_name():
    s = spec("baseline")
    names = ["baseline_apt_cache_valid_time", "baseline_packages"]
    assert _role_inputs.renamed_inputs(s, names) == [("baseline_apt_cache_valid_time", "gpufleet_apt_cache_valid_time")]
    # Not also "not an option" (nor an error under gpufleet_strict_inputs).
    assert _role_inputs.unknown_inputs(s, names) == []
    assert _role_inputs.renamed_message("baseline_apt_cache_valid_time", "gpufleet_apt_cache_valid_time").startswith(
        "baseline_apt_cache_valid_time is renamed: use gpufleet_apt_cache_valid_time")


@pytest.mark.parametrize("value, ok", [(3600, True), ("600", True), (0, True), (-1, False), ("hourly", False),
                                       (True, False)])
def test_the_fleet_wide_index_time_is_checked_once_for_every_role(value, ok):
    errors = _role_inputs.fleet_errors({"gpufleet_apt_cache_valid_time": value})
    assert (errors == []) == ok
    if not ok:
        assert errors[0].startswith("gpufleet_apt_cache_valid_time must be 0 or more seconds (got ")
        assert errors[0].endswith("for example gpufleet_apt_cache_valid_time: 3600.")


@pytest.mark.parametrize("role, old", [("monitoring", "monitoring_node_exporter_textfile_dir"),
                                       ("node_health", "node_health_textfile_dir"), ("pull", "pull_textfile_dir"),
                                       ("backup", "backup_textfile_dir"), ("guard", "guard_textfile_dir")])
def test_the_roles_textfile_directories_are_one_fleet_setting(role, old):
    s = spec(role)
    assert not s.is_known(old), f"{role} still has an option {old}"
    assert _role_inputs.renamed_inputs(s, [old]) == [(old, "gpufleet_textfile_dir")]
    assert _role_inputs.unknown_inputs(s, [old]) == []


@pytest.mark.parametrize("value, ok", [("/var/lib/prometheus/node-exporter", True), ("/srv/metrics", True),
                                       ("var/lib/prometheus", False), ("", False), (42, False), (["/a"], False)])
def test_the_fleet_textfile_directory_must_be_an_absolute_path(value, ok):
    errors = _role_inputs.fleet_errors({"gpufleet_textfile_dir": value})
    assert (errors == []) == ok
    if not ok:
        assert errors[0].startswith("gpufleet_textfile_dir must be an absolute path (got ")
        assert errors[0].endswith("for example gpufleet_textfile_dir: /var/lib/prometheus/node-exporter.")


@pytest.mark.parametrize("role", ROLES)
def test_no_role_keeps_an_index_time_of_its_own(role):
    # One refresh a run and node: one setting, gpufleet_apt_cache_valid_time.
    assert not [o for o in spec(role).options if o.endswith("_apt_cache_valid_time") and not o.startswith("_")]


@pytest.mark.parametrize("value, ok", [("nvidia_smi", True), ("dcgm", True), ("none", True), ("nvml", False),
                                       ("DCGM", False), ("", False), (True, False), (["dcgm"], False)])
def test_the_fleet_gpu_exporter_is_one_of_three(value, ok):
    errors = _role_inputs.fleet_errors({"gpufleet_gpu_exporter": value})
    assert (errors == []) == ok
    if not ok:
        assert errors == ["gpufleet_gpu_exporter must be one of nvidia_smi, dcgm, none (got %s %r), for example "
                          "gpufleet_gpu_exporter: nvidia_smi." % (_role_inputs._kind(value), value)]
