"""gpufleet.cloud.preflight in a real ansible-playbook run on this machine,
through _common's preflight file as the roles use it: every case is its
own inventory host (all of them aliases of localhost), so one run covers
them all and each case reads its own result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]


def _play(name, hosts, facts, os_check):
    return f"""
- name: {name}
  hosts: {hosts}
  gather_facts: {facts}
  gather_subset: [min]
  tasks:
    - name: Preflight
      ansible.builtin.import_role:
        name: gpufleet.cloud._common
        tasks_from: preflight
        rolespec_validate: false
      vars:
        _common_role: baseline
        _common_os_check: {os_check}
        # As after an earlier role's refresh: this machine's index is not
        # the test's to refresh.
        __common_apt_index: {{skipped: true}}
        # The calling role's own checks, as a role passes them.
        _common_checks:
          - that: "{{{{ (check_value | default(2048)) | int >= 1024 }}}}"
            msg: "baseline_nofile must be at least 1024 (got {{{{ check_value | default(2048) }}}})."
          - that: "{{{{ check_second | default(true) }}}}"
            msg: "the second check failed"
          # A message is templated only when its condition is false.
          - that: true
            msg: "{{{{ a_variable_nobody_defined }}}}"
          # A condition that fails to template is reported, not a crash.
          - that: "{{{{ not (check_broken | default(false)) or a_variable_nobody_defined.key }}}}"
            msg: "never shown"
          # warn: a setting that works, but poorly: a warning, not a failure.
          - that: "{{{{ (check_value | default(2048)) | int >= 2000 }}}}"
            warn: true
            msg: "baseline_nofile below 2000 (got {{{{ check_value | default(2048) }}}}) works, but poorly."
"""


# The machine running the tests need not boot with systemd: the OS check
# runs only where no facts were gathered, and must say so.
PLAY = _play("Facts, as every role's play gathers them", "facts", "true", "false") + _play(
    "No facts gathered", "nofacts", "false", "true")

CASES = {
    "clean": {},
    "list as string": {"baseline_packages": "curl, jq"},
    "list from a template": {"baseline_packages": "{{ ['curl'] + ['jq'] }}"},
    "dict as string": {"baseline_sysctl_extra": "vm.swappiness=10"},
    "misspelt": {"baseline_ntp_server": ["ntp.example.com"]},
    "misspelt, strict": {"baseline_ntp_server": ["ntp.example.com"], "gpufleet_strict_inputs": True},
    "strict, not a boolean": {"gpufleet_strict_inputs": "perhaps"},
    "a check fails": {"check_value": 10},
    # site.yml applies the roles without Ansible's argument validation: the
    # type check answers in the project's words.
    "a number with a unit": {"baseline_nofile": "1M"},
    "a value outside the choices": {"baseline_kernel_apply": "sometimes"},
    "a renamed option": {"baseline_apt_cache_valid_time": 600, "gpufleet_strict_inputs": True},
    "a renamed switch": {"baseline_time_sync": False, "gpufleet_strict_inputs": True},
    "a fleet setting of the wrong kind": {"gpufleet_apt_cache_valid_time": "hourly"},
    "a relative textfile directory": {"gpufleet_textfile_dir": "{{ 'metrics' }}"},
    "a warning check fails": {"check_value": 1500},
    "two checks fail": {"check_value": 10, "check_second": False},
    "a check and a shape fail": {"check_value": 10, "baseline_packages": "curl"},
    "a check that is not a condition": {"check_second": "perhaps"},
    "a check that cannot be evaluated": {"check_broken": True, "check_value": 10},
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = tmp_path_factory.mktemp("preflight")
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {f"case{i}": {**local, **v} for i, v in enumerate(CASES.values())}
    inventory = {"facts": {"hosts": hosts}, "nofacts": {"hosts": {"nofacts": dict(local)}}}
    (work / "inventory.json").write_text(json.dumps(inventory))
    (work / "play.yml").write_text(PLAY)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_FORKS": "10", "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(work / "inventory.json"),
                          str(work / "play.yml")], capture_output=True, text=True, env=env, timeout=300, cwd=work,
                         check=False)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"no JSON report (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    found = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].endswith("Check the node and the role's inputs"):
                found.update(task["hosts"])
    names = dict(zip(CASES, hosts))
    return {case: found[names[case]] for case in CASES} | {"no facts": found["nofacts"]}


def test_clean_inputs_pass_without_a_warning(results):
    r = results["clean"]
    assert not r.get("failed") and not r.get("changed") and not r.get("warnings"), r
    assert r["unknown_inputs"] == []


def test_a_string_for_a_list_fails_naming_the_option_and_the_fix(results):
    r = results["list as string"]
    assert r.get("failed"), r
    assert "baseline_packages: expected a list, got the string 'curl, jq'" in r["msg"]
    assert "baseline_packages: ['curl', 'jq']" in r["msg"]


def test_a_templated_list_is_checked_as_what_it_renders_to(results):
    assert not results["list from a template"].get("failed"), results["list from a template"]


def test_a_string_for_a_dictionary_fails(results):
    r = results["dict as string"]
    assert r.get("failed") and "baseline_sysctl_extra: expected a dictionary" in r["msg"], r


def test_a_misspelt_variable_warns_with_a_suggestion(results):
    r = results["misspelt"]
    assert not r.get("failed"), r
    assert r["unknown_inputs"] == ["baseline_ntp_server"]
    assert any("did you mean baseline_ntp_servers?" in w for w in r.get("warnings", [])), r


def test_strict_inputs_make_a_misspelling_an_error(results):
    r = results["misspelt, strict"]
    assert r.get("failed") and "did you mean baseline_ntp_servers?" in r["msg"], r


def test_a_strict_switch_that_is_not_a_boolean_is_named(results):
    r = results["strict, not a boolean"]
    assert r.get("failed") and "gpufleet_strict_inputs: expected true or false" in r["msg"], r


def test_without_facts_the_os_check_says_what_to_do(results):
    r = results["no facts"]
    assert r.get("failed") and "keep gather_facts on for this play" in r["msg"], r


def test_a_failed_check_gives_its_message(results):
    r = results["a check fails"]
    assert r.get("failed") and r["msg"] == "baseline_nofile must be at least 1024 (got 10).", r


def test_a_scalar_of_the_wrong_type_is_refused_in_the_projects_words(results):
    r = results["a number with a unit"]
    assert r.get("failed"), r
    assert r["msg"].startswith("baseline_nofile must be a whole number (got a string '1M'), for example baseline_nofile: "), r
    r = results["a value outside the choices"]
    assert r.get("failed") and r["msg"].startswith("baseline_kernel_apply must be one of "), r
    assert "(got 'sometimes'), for example baseline_kernel_apply: " in r["msg"] and "_Ansible" not in r["msg"], r


def test_a_renamed_option_warns_even_when_strict_and_a_fleet_setting_is_checked(results):
    r = results["a renamed option"]
    assert not r.get("failed") and r["unknown_inputs"] == [], r
    assert r["warnings"] == ["baseline_apt_cache_valid_time is renamed: use gpufleet_apt_cache_valid_time, one setting "
                             "for every role (baseline_apt_cache_valid_time is still read in this release, where "
                             "gpufleet_apt_cache_valid_time is not set)."], r
    r = results["a renamed switch"]
    assert not r.get("failed") and r["unknown_inputs"] == [], r
    assert r["warnings"] == ["baseline_time_sync is renamed: use baseline_time_sync_enabled (baseline_time_sync is "
                             "still read in this release, where baseline_time_sync_enabled is not set)."], r
    r = results["a fleet setting of the wrong kind"]
    assert r.get("failed") and r["msg"].startswith("gpufleet_apt_cache_valid_time must be 0 or more seconds"), r
    # Templated as the play reads it, then refused naming only it.
    r = results["a relative textfile directory"]
    assert r.get("failed") and r["msg"] == ("gpufleet_textfile_dir must be an absolute path (got a string 'metrics'), "
                                            "for example gpufleet_textfile_dir: /var/lib/prometheus/node-exporter."), r


def test_a_warning_check_warns_and_does_not_fail(results):
    r = results["a warning check fails"]
    assert not r.get("failed"), r
    assert r["warnings"] == ["baseline_nofile below 2000 (got 1500) works, but poorly."], r
    # With an error beside it, both are given: the error fails the task.
    failed = results["a check fails"]
    assert failed.get("failed") and "works, but poorly" in " ".join(failed.get("warnings", [])), failed


def test_every_failed_check_is_named_in_one_run(results):
    r = results["two checks fail"]
    assert r.get("failed"), r
    assert "baseline_nofile must be at least 1024 (got 10)." in r["msg"] and "the second check failed" in r["msg"], r


def test_checks_wait_for_the_input_shapes(results):
    # A string for a list would make a condition written for a list fail to
    # template: the shape error alone is reported.
    r = results["a check and a shape fail"]
    assert r.get("failed") and "baseline_packages: expected a list" in r["msg"], r
    assert "at least 1024" not in r["msg"], r


def test_a_check_that_gives_no_boolean_is_named(results):
    r = results["a check that is not a condition"]
    assert r.get("failed") and "_common_checks[1].that and .warn must give true or false" in r["msg"], r


def test_a_check_that_cannot_be_evaluated_is_reported_with_the_others(results):
    r = results["a check that cannot be evaluated"]
    assert r.get("failed"), r
    assert "_common_checks[3] could not be evaluated" in r["msg"] and "a_variable_nobody_defined" in r["msg"], r
    assert "baseline_nofile must be at least 1024 (got 10)." in r["msg"], r
