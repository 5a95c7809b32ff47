"""Every role's own preflight checks, over the cases of its lab bad-input
suite (tests/integration/roles/<role>/test_bad_input.py): where a case is
refused by the role's checks (not by Ansible's argument validation, which
the lab suite proves), it is refused by exactly one message, which names
the case's option and no option the case did not set, gives an example,
and shows no internal class name. The defaults (with the suite's valid
inputs) pass without a warning."""

from __future__ import annotations

import importlib

import pytest

from tests.unit.roles.preflight_checks import ROOT, ConditionError, evaluate, named

ROLES = sorted(p.parent.name for p in ROOT.glob("tests/integration/roles/*/test_bad_input.py"))


def suite(role):
    """(the lab suite's cases, the valid inputs each starts from, the valid
    inputs of the role that its cases use)."""
    module = importlib.import_module(f"tests.integration.roles.{role}.test_bad_input")
    good = module.test_bad_input_fails_in_preflight_and_changes_nothing.good
    return module.CASES, good, getattr(module, "GOOD", good)


CASES = [(role, case) for role in ROLES for case in suite(role)[0]]


@pytest.mark.parametrize("role", ROLES)
def test_the_defaults_and_the_suites_valid_inputs_pass_without_a_warning(role):
    assert evaluate(role, suite(role)[2]) == ([], [])


# Options a message may name besides those the case set: the option whose
# setting is the fix (a branch table to extend, an alternative to give), or
# the other side of a combination that cannot work.
ADVISED = {
    ("backup", "schedule cannot meet the RPO"): {"backup_max_runtime_seconds", "backup_interval_seconds"},
    ("cuda", "driver of an unknown branch"): {"cuda_driver_branches"},
    ("guard", "stop without a cloud"): {"guard_final_action", "guard_stop_command"},
    ("guard", "stop without the instance"): {"guard_final_action", "guard_stop_region"},
    ("guard", "stop without credentials"): {"guard_final_action", "guard_stop_credentials"},
    ("guard", "stop with half a key"): {"guard_final_action", "guard_stop_uses_instance_role"},
    ("guard", "spot without a cloud"): {"guard_spot_enabled"},
    ("guard", "job cap without the job's unit"): {"guard_job_cap"},
    ("guard", "a margin past AWS's spot notice"): {"guard_poll_seconds"},
    ("guard", "repair without a breaker"): {"guard_repair_classes", "guard_repair_breaker_command"},
    ("guard", "repair reboot without credentials"): {"guard_repair_classes", "guard_stop_credentials"},
    ("cloud_agent", "CloudWatch without a pinned package"): {"cloud_agent_package_sha256"},
    ("nvidia_driver", "unknown branch"): {"nvidia_driver_branches"},
    ("pull", "token in the URL"): {"pull_private_key_file"},
    ("docker", "tcp socket without tls"): {"docker_tls_ca_cert", "docker_tls_cert", "docker_tls_key"},
    ("docker", "daemon.json: socket outside the role"): {"docker_data_root", "docker_tcp_listen"},
}


@pytest.mark.parametrize(("role", "case"), CASES, ids=[f"{r}: {c}" for r, c in CASES])
def test_a_refusal_is_one_message_naming_only_what_the_case_set(role, case):
    cases, good, _valid = suite(role)
    inputs, variable = cases[case][0], cases[case][1]
    try:
        refused, _warned = evaluate(role, {**good, **inputs})
    except ConditionError:
        # An input of the wrong type makes a condition fail to template:
        # the argument validation or the shape check refuses it first.
        pytest.skip("refused before the role's own checks (argument validation or input shapes)")
    if not refused:
        # A misspelt variable: a warning, an error only under gpufleet_strict_inputs.
        assert "gpufleet_strict_inputs" in inputs, f"{case} is not refused by the preflight"
        pytest.skip("a misspelt variable: refused as unknown under gpufleet_strict_inputs")
    assert len(refused) == 1, refused
    (message,) = refused
    assert variable.split("/")[0] in message, message
    if len(cases[case]) > 2:
        # What the lab suite asserts of the same case, here without a node.
        assert cases[case][2] in message, message
    extra = named(role, message) - set(inputs) - {variable} - ADVISED.get((role, case), set())
    assert not extra, f"names {sorted(extra)}, which the case did not set: {message}"
    assert "for example" in message or "e.g." in message, f"no example: {message}"
    assert "_Ansible" not in message, message
