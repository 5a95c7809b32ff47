"""The shared check of the roles' bad-input tests: a run with bad inputs
fails before anything changes, names the variable (and the reason, where a
case gives one), and leaves the node as it was.

Each case is its own inventory host (an alias of one fresh node) carrying
its inputs as host variables, the way users set them in group_vars. Every
alias must fail on its own, in its own result, with no change reported for
it; the files and packages the roles manage must still be absent
afterwards. A case whose input were wrongly accepted goes on to change the
node, and its alias reports it.

Every role's cases (each role's test_bad_input.py registers them with
bad_input_test()) run in one ansible-playbook run on one node: each alias
includes its own role. One run instead of one per role saves a node's boot
and Ansible's start-up per role (docs/performance.md, "Test loop"); the run
is shared by the test run's pytest workers (every_role_outcome()). The
NVIDIA repository tests, whose cases need a node serving the repositories,
run theirs with run_cases(), one run per role on that node."""

from __future__ import annotations

import contextlib
import fcntl
import json
import threading
import traceback
from pathlib import Path

import pytest

from tests.support.nodes import PODMAN_CONNECTION, PODMAN_PYTHON, node_has_package, node_has_path, run_playbook

# role -> its cases' inputs and what it manages, filled by bad_input_test()
# as each role's test module is imported (every pytest worker imports every
# collected module).
REGISTERED: dict[str, dict] = {}


def alias(index: int) -> str:
    return f"case{index:03d}"


def site_like_play(roles: str | list[str]) -> str:
    """A play that applies each role as site.yml does: with
    rolespec_validate: false, so the role's preflight, not Ansible's
    argument validation, answers a wrong type (in the project's words)."""
    tasks = "".join(f"""
    - name: Apply {role}
      ansible.builtin.import_role:
        name: {role}
        rolespec_validate: false
""" for role in ([roles] if isinstance(roles, str) else roles))
    return f"""
- hosts: all
  gather_facts: true
  tasks:{tasks}"""


# Each alias includes the role its host variable names. Ansible ends a
# playbook at the first play in which every host failed, so one play per
# role cannot carry every role's cases: one play, a dynamic include.
EVERY_ROLE_PLAY = """
- hosts: all
  gather_facts: true
  tasks:
    - name: Apply the case's role
      ansible.builtin.include_role:
        name: "{{ bad_input_role }}"
        rolespec_validate: false
"""


def _run(node: str, hosts: dict[str, dict], play: str, workdir: Path, forks: int) -> tuple[int, str, dict, dict]:
    """One ansible-playbook run of `play` over `hosts` (alias -> its
    variables), each an alias of `node`. Returns the exit code, the whole
    output, each alias's stats and the text of its failed or changed
    results."""
    node_vars = {"ansible_host": node, "ansible_connection": PODMAN_CONNECTION, "ansible_python_interpreter": PODMAN_PYTHON}
    inventory = workdir / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {name: {**node_vars, **v} for name, v in hosts.items()}}}))
    playbook = workdir / "play.yml"
    playbook.write_text(play)
    # One structured record per host and task, so each case's message is
    # read from that case's own results.
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_FORKS": str(forks)}
    result = run_playbook("-i", str(inventory), str(playbook), env=env)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"ansible-playbook did not print its JSON report:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    texts = {name: [] for name in hosts}
    for play_ in report.get("plays", []):
        for task in play_.get("tasks", []):
            for name, host_result in task.get("hosts", {}).items():
                if name in texts and (host_result.get("failed") or host_result.get("changed")):
                    texts[name].append(f"TASK [{task['task']['name']}] " + json.dumps(host_result))
    return result.returncode, result.stdout + result.stderr, report.get("stats", {}), texts


def _outcome(rc: int, output: str, stats: dict, texts: dict, aliases: dict[str, str]) -> dict:
    return {
        "rc": rc,
        "output": output,
        "cases": {case: {"stats": stats.get(name, {}), "text": "\n".join(texts[name])} for case, name in aliases.items()},
    }


def run_cases(node: str, role: str | list[str], cases: dict[str, dict], workdir: Path) -> dict:
    """Apply `role` (or each of a list of roles, in order) once to every
    case (case id -> input variables), each as its own alias of `node`.
    Returns the run's exit code, its whole output, and per case: its stats
    and the text of its own results."""
    aliases = {case: alias(i) for i, case in enumerate(cases)}
    hosts = {aliases[case]: variables for case, variables in cases.items()}
    rc, output, stats, texts = _run(node, hosts, site_like_play(role), workdir, max(5, len(cases)))
    return _outcome(rc, output, stats, texts, aliases)


def run_every_role(node: str, workdir: Path, roles: dict[str, dict] | None = None) -> dict[str, dict]:
    """Every registered role's cases in one run on `node` (see the module's
    docstring); then what each role manages that is on the node. Returns
    role -> its outcome, as run_cases() gives it, with `left_behind`."""
    roles = REGISTERED if roles is None else roles
    aliases = {role: {case: f"{role.rsplit('.', 1)[-1]}-{alias(i)}" for i, case in enumerate(spec["inputs"])}
               for role, spec in roles.items()}
    hosts = {aliases[role][case]: {**variables, "bad_input_role": role}
             for role, spec in roles.items() for case, variables in spec["inputs"].items()}
    # A role's cases at once, as in a run of their own.
    forks = max([5] + [len(spec["inputs"]) for spec in roles.values()])
    rc, output, stats, texts = _run(node, hosts, EVERY_ROLE_PLAY, workdir, forks)
    outcomes = {}
    for role, spec in roles.items():
        outcome = _outcome(rc, output, stats, texts, aliases[role])
        outcome["left_behind"] = [p for p in spec["files"] if node_has_path(node, p)]
        outcome["left_behind"] += [f"package {p}" for p in spec["packages"] if node_has_package(node, p)]
        outcomes[role] = outcome
    return outcomes


_LOCK, _RESULT = "bad-input.lock", "bad-input-outcomes.json"


def _write_outcomes(shared_dir: Path, fresh_node) -> None:
    """run_every_role() on a node of its own (`fresh_node()`, a context
    manager that yields a node's name); its outcomes, or why there are
    none, written to `shared_dir`."""
    try:
        workdir = shared_dir / "bad-input"
        workdir.mkdir(exist_ok=True)
        with fresh_node() as node:
            outcomes = run_every_role(node, workdir)
        # The run's output once, not in each role's outcome: it holds every
        # role's, and fourteen copies made the file 119 MB.
        written = {"output": next(iter(outcomes.values()))["output"] if outcomes else "",
                   "roles": {role: {k: v for k, v in outcome.items() if k != "output"}
                             for role, outcome in outcomes.items()}}
    except Exception:  # pylint: disable=broad-exception-caught  # the waiting tests need the reason
        written = {"error": traceback.format_exc()}
    (shared_dir / _RESULT).write_text(json.dumps(written))


@contextlib.contextmanager
def every_role_started(shared_dir: Path, fresh_node, wanted: bool = True):
    """Start run_every_role() in the background, in the first pytest
    worker of the test run to get here, unless it has run already; on
    leaving, wait for it. The bad-input tests come after the long role
    tests (tests/integration/conftest.py), so they find it done instead of
    holding a worker while one run does every role's cases. A test run
    that selected no bad-input test (`wanted` false) starts nothing."""
    if not (wanted and REGISTERED):
        yield
        return
    # Held open (and so locked) by the thread until its run is done.
    lock = open(shared_dir / _LOCK, "a", encoding="utf-8")  # pylint: disable=consider-using-with
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another worker's run holds it
        lock.close()
        yield
        return
    if (shared_dir / _RESULT).exists():
        lock.close()
        yield
        return

    def run():
        try:
            _write_outcomes(shared_dir, fresh_node)
        finally:
            lock.close()  # releases the lock

    thread = threading.Thread(target=run, name="bad-input run", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def every_role_outcome(shared_dir: Path, fresh_node) -> dict[str, dict]:
    """The outcomes of the test run's one run_every_role(): waits for the
    run every_role_started() began, or makes it here where none was
    started."""
    with open(shared_dir / _LOCK, "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared_dir / _RESULT).exists():
            _write_outcomes(shared_dir, fresh_node)
    written = json.loads((shared_dir / _RESULT).read_text())
    if "error" in written:
        pytest.fail(f"the shared bad-input run failed:\n{written['error']}")
    return {role: {**outcome, "output": written["output"]} for role, outcome in written["roles"].items()}


def assert_case_refused(outcome: dict, case: str, variable: str, reason: str | None = None) -> str:
    """One case of a run_cases() outcome failed exactly once, before any
    change, naming `variable` (and giving `reason`) in its own results.
    Returns the case's text."""
    mine = outcome["cases"][case]
    where = f"case {case!r}:\n{mine['text'] or outcome['output'][-3000:]}"
    assert outcome["rc"] == 2, f"exit {outcome['rc']}: " + where
    assert mine["stats"].get("failures") == 1, f"it did not fail exactly once: {mine['stats']}\n" + where
    assert mine["stats"].get("changed") == 0, f"it changed the node: {mine['stats']}\n" + where
    assert variable in mine["text"], f"the error does not name {variable}:\n" + where
    if reason:
        assert reason in mine["text"], f"the error does not say {reason!r}:\n" + where
    return mine["text"]


def bad_input_test(role, cases, files=(), packages=(), good=None, forbidden=()):
    """The parametrized test of one role's bad-input cases.

    cases: id -> (input variables, the variable the error must name[, the
    reason it must give]); `good` holds valid inputs every case starts
    from, so each case has exactly one thing wrong. files and packages are
    what the role manages, which must stay absent; no string of
    `forbidden` (secrets) may show anywhere in the run's output. The cases
    run with every other role's (run_every_role())."""
    inputs = {case: {**(good or {}), **spec[0]} for case, spec in cases.items()}
    REGISTERED[role] = {"inputs": inputs, "files": list(files), "packages": list(packages)}

    @pytest.mark.parametrize("case", list(cases), ids=list(cases))
    def test_bad_input_fails_in_preflight_and_changes_nothing(case, bad_input_outcomes):
        variable, reason = cases[case][1], (cases[case][2] if len(cases[case]) > 2 else None)
        assert role in bad_input_outcomes, f"the shared bad-input run did not include {role}"
        outcome = bad_input_outcomes[role]
        assert_case_refused(outcome, case, variable, reason)
        assert not outcome["left_behind"], f"the failed runs left these on the node: {outcome['left_behind']}"
        for secret in forbidden:
            assert secret not in outcome["output"], f"{secret!r} shows in the output"

    # The valid inputs every case starts from, for the unit harness
    # (tests/unit/roles/test_preflight_messages.py), which checks the same cases.
    test_bad_input_fails_in_preflight_and_changes_nothing.good = dict(good or {})
    return test_bad_input_fails_in_preflight_and_changes_nothing
