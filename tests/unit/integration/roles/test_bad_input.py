"""tests/integration/roles/bad_input.py's sharing of the one bad-input run:
the first pytest worker to start it runs it in the background, every
worker gets its outcomes, the run happens once per test run, and a run
that failed is a failure that says why, never "no cases". The workers here
are processes, as pytest-xdist's are, and the run a stand-in that records
each call (no node, no Ansible)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import time

import pytest

from tests.integration.roles import bad_input

ROLES = {"gpufleet.cloud.baseline": {"inputs": {"bad": {"baseline_nofile": "lots"}}, "files": [], "packages": []},
         "gpufleet.cloud.security": {"inputs": {"bad": {"security_ssh_port": "x"}}, "files": [], "packages": []}}
# One run's output, which holds every role's cases.
OUTPUT = "PLAY [every role's bad input] ... the run's whole output"


def outcome(role):
    return {"rc": 2, "output": OUTPUT, "cases": {"bad": {"stats": {"failures": 1}, "text": role}}, "left_behind": []}


@contextlib.contextmanager
def stand_in_node():
    yield "node-1"


def stand_in_run(calls):
    def run(node, workdir, roles=None):
        del roles
        with open(calls, "a", encoding="utf-8") as handle:
            handle.write(f"{node} {workdir.name}\n")
        time.sleep(0.5)  # long enough for the other worker to arrive while it runs
        return {role: outcome(role) for role in ROLES}
    return run


def worker(shared, calls, out):
    bad_input.REGISTERED = dict(ROLES)
    bad_input.run_every_role = stand_in_run(calls)
    with bad_input.every_role_started(shared, stand_in_node):
        outcomes = bad_input.every_role_outcome(shared, stand_in_node)
    out.put(outcomes)


def test_two_workers_share_one_run_and_both_get_its_outcomes(tmp_path):
    calls = tmp_path / "calls"
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    workers = [context.Process(target=worker, args=(tmp_path, calls, out)) for _worker in range(2)]
    for process in workers:
        process.start()
    results = [out.get(timeout=60) for _process in workers]
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert calls.read_text().splitlines() == ["node-1 bad-input"]
    assert results[0] == results[1] == {role: outcome(role) for role in ROLES}


def test_a_worker_that_started_nothing_runs_it_itself(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setattr(bad_input, "REGISTERED", dict(ROLES))
    monkeypatch.setattr(bad_input, "run_every_role", stand_in_run(calls))
    assert bad_input.every_role_outcome(tmp_path, stand_in_node) == {role: outcome(role) for role in ROLES}
    # Asked again, it reads what the first ask wrote: each role's outcome
    # with the run's output, which the file holds once.
    assert bad_input.every_role_outcome(tmp_path, stand_in_node) == {role: outcome(role) for role in ROLES}
    assert calls.read_text().splitlines() == ["node-1 bad-input"]
    assert (tmp_path / "bad-input-outcomes.json").read_text().count(OUTPUT) == 1


def test_a_run_that_failed_fails_every_bad_input_test_with_its_reason(tmp_path, monkeypatch):
    def broken(node, workdir, roles=None):
        raise RuntimeError(f"{node}: podman exec failed")

    monkeypatch.setattr(bad_input, "REGISTERED", dict(ROLES))
    monkeypatch.setattr(bad_input, "run_every_role", broken)
    with bad_input.every_role_started(tmp_path, stand_in_node):
        pass
    with pytest.raises(pytest.fail.Exception, match="node-1: podman exec failed"):
        bad_input.every_role_outcome(tmp_path, stand_in_node)
    assert "error" in json.loads((tmp_path / "bad-input-outcomes.json").read_text())


def test_a_test_run_without_bad_input_tests_starts_nothing(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setattr(bad_input, "run_every_role", stand_in_run(calls))
    monkeypatch.setattr(bad_input, "REGISTERED", {})
    with bad_input.every_role_started(tmp_path, stand_in_node):
        pass
    # Modules imported, but none of their tests selected (-k, -m).
    monkeypatch.setattr(bad_input, "REGISTERED", dict(ROLES))
    with bad_input.every_role_started(tmp_path, stand_in_node, wanted=False):
        pass
    assert list(tmp_path.iterdir()) == []
