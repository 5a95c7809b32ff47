"""plugin_utils/_node_vars.py: the one list of gpufleet_* variables a node's
runs read from the inventory, which playbooks/pull.yml hands to pull runs.

The list is checked against what the collection really reads: every
gpufleet_* variable in a Jinja expression of a role's tasks, handlers,
defaults, vars and templates, of the playbooks, and every one the action
plugins read from task_vars, less the ones the collection sets itself. A
role that starts reading a new gpufleet_* variable fails this test until
the list has it, so pull mode never loses it."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml

from ansible_collections.gpufleet.cloud.plugins.filter import node_vars as node_vars_filter
from ansible_collections.gpufleet.cloud.plugins.module_utils._gpu_record import RECORD_KEYS
from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _node_vars

ROOT = Path(__file__).resolve().parents[4]
# Jinja's lexer warns about regex escapes in string literals (a regex's backslashes); Ansible
# reads the same templates.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
PREFIX = "gpufleet_"
# Keys whose value is a bare Jinja expression (no braces).
BARE = ("when", "that", "failed_when", "changed_when", "until")
# Ansible's YAML tags (!unsafe, !vault) as plain scalars.
Loader = type("Loader", (yaml.SafeLoader,), {})
Loader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node))


class _Any(dict):
    """Every filter and test name is known: Ansible's and the collections'
    are not Jinja's own, and only the variables matter here."""

    def __contains__(self, name):
        return True

    def __missing__(self, name):
        return lambda *args, **kwargs: None

    def get(self, name, default=None):
        return self[name]


_JINJA = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
_JINJA.filters, _JINJA.tests = _Any(_JINJA.filters), _Any(_JINJA.tests)
_TASK_VARS = re.compile(r"""task_vars(?:\.get\(|\[)\s*["'](gpufleet_\w+)["']""")


def _read(expression: str, env: jinja2.Environment = _JINJA) -> set[str]:
    try:
        return jinja2.meta.find_undeclared_variables(env.parse(expression))
    except jinja2.TemplateSyntaxError as exc:
        raise AssertionError(f"not Jinja: {expression!r}: {exc}") from None


def _delimited(task: dict) -> dict[str, tuple[str, str]]:
    """The templates a template task renders with delimiters of its own
    (monitoring's Prometheus rules use [[ ]]), by file name."""
    args = task.get("ansible.builtin.template")
    if not isinstance(args, dict) or "variable_start_string" not in args:
        return {}
    items = task.get("loop") or [None]
    return {args["src"].replace("{{ item }}", item or ""): (args["variable_start_string"], args["variable_end_string"])
            for item in items}


def _walk(node, reads: set[str], sets: set[str], key=None, delimiters=None):
    if isinstance(node, dict):
        if delimiters is not None:
            delimiters.update(_delimited(node))
        for name, value in node.items():
            if name in ("vars", "set_fact", "ansible.builtin.set_fact") and isinstance(value, dict):
                sets.update(value)
            elif name == "register" and isinstance(value, str):
                sets.add(value)
            elif name == "loop_var" and isinstance(value, str):
                sets.add(value)
            _walk(value, reads, sets, name, delimiters)
    elif isinstance(node, list):
        for item in node:
            # `when: [a, b]` is a list of bare expressions.
            _walk(item, reads, sets, key if key in BARE else None, delimiters)
    elif isinstance(node, str):
        if "{{" in node or "{%" in node:
            reads.update(_read(node))
        elif key in BARE:
            reads.update(_read("{{ " + node + " }}"))


def scan(root: Path) -> tuple[set[str], set[str]]:
    """(gpufleet_* variables read, gpufleet_* variables set) in the
    collection at `root`."""
    reads: set[str] = set()
    sets: set[str] = set()
    delimiters: dict[str, tuple[str, str]] = {}
    for sub in ("tasks", "handlers", "defaults", "vars"):
        for path in sorted(root.glob(f"roles/*/{sub}/*.yml")):
            data = yaml.load(path.read_text(), Loader=Loader)  # nosec B506: a safe loader
            if sub in ("defaults", "vars") and isinstance(data, dict):
                sets.update(data)
            _walk(data, reads, sets, delimiters=delimiters)
    for path in sorted(root.glob("playbooks/*.yml")) + sorted(root.glob("*.yml")):
        _walk(yaml.load(path.read_text(), Loader=Loader), reads, sets)  # nosec B506
    for path in sorted(root.glob("roles/*/templates/*.j2")):
        start, end = delimiters.get(path.name, ("{{", "}}"))
        reads.update(_read(path.read_text(), _JINJA.overlay(variable_start_string=start, variable_end_string=end)))
    for path in sorted(root.glob("plugins/action/*.py")):
        reads.update(_TASK_VARS.findall(path.read_text()))
    return {n for n in reads if n.startswith(PREFIX)}, {n for n in sets if n.startswith(PREFIX)}


def test_every_gpufleet_variable_the_collection_reads_is_on_the_list():
    reads, sets = scan(ROOT)
    missing = reads - sets - set(_node_vars.NODE_VARIABLES) - set(_node_vars.PUSH_ONLY)
    assert not missing, (f"read from the inventory, but a pull run would not get them: {sorted(missing)}: "
                         "add each to plugins/plugin_utils/_node_vars.py")
    # The scan is no check that cannot fail: it finds what the roles and
    # site.yml are known to read, each kind of place once.
    assert {"gpufleet_gpu", "gpufleet_spot", "gpufleet_instance_id", "gpufleet_textfile_dir",
            "gpufleet_site_gpu_stack", "gpufleet_strict_inputs", "gpufleet_serial"} <= reads, sorted(reads)


def test_every_setting_on_the_list_is_read():
    # A setting nothing reads would be passed to every node for nothing;
    # the discovery variables are the plugins' record, read or not.
    reads, _sets = scan(ROOT)
    assert set(_node_vars.SETTINGS) | set(_node_vars.PUSH_ONLY) <= reads


def test_the_discovery_variables_are_the_plugins_record():
    assert _node_vars.DISCOVERY == tuple("gpufleet_" + key for key in RECORD_KEYS)
    assert len(set(_node_vars.NODE_VARIABLES)) == len(_node_vars.NODE_VARIABLES)
    assert not set(_node_vars.NODE_VARIABLES) & set(_node_vars.PUSH_ONLY)


def test_a_new_read_is_found_wherever_it_is(tmp_path):
    """A planted read in each kind of place is found; a variable the
    collection sets itself is told apart."""
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "templates").mkdir()
    (tmp_path / "plugins" / "action").mkdir(parents=True)
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text(
        "- name: t\n  ansible.builtin.debug: {msg: \"{{ gpufleet_in_braces | default(1) }}\"}\n"
        "  when: [gpufleet_bare_when, other]\n"
        "- name: s\n  ansible.builtin.set_fact: {gpufleet_set_here: 1}\n"
        "- name: a\n  ansible.builtin.assert: {that: gpufleet_in_that is defined}\n"
        "  register: gpufleet_registered\n"
        "- name: u\n  ansible.builtin.debug: {msg: !unsafe \"{{ gpufleet_unsafe_tag }}\"}\n")
    (tmp_path / "roles" / "r" / "templates" / "f.j2").write_text(
        "gpufleet_metric_name 1\n{% for x in gpufleet_in_template %}{{ x }}{% endfor %}\n")
    (tmp_path / "plugins" / "action" / "a.py").write_text('x = task_vars.get("gpufleet_in_python", False)\n')
    (tmp_path / "playbooks" / "p.yml").write_text(
        "- hosts: all\n  serial: \"{{ gpufleet_in_play }}\"\n  vars: {gpufleet_play_var: 1}\n  tasks: []\n")
    reads, sets = scan(tmp_path)
    assert reads == {"gpufleet_in_braces", "gpufleet_bare_when", "gpufleet_in_that", "gpufleet_unsafe_tag",
                     "gpufleet_in_template", "gpufleet_in_python", "gpufleet_in_play"}
    assert sets == {"gpufleet_set_here", "gpufleet_registered", "gpufleet_play_var"}


class _HostVars(dict):
    """Like Ansible's HostVarsVars: a mapping, not a dict subclass's values."""


@pytest.mark.parametrize("kind", [dict, _HostVars])
def test_the_filter_takes_the_listed_variables_the_host_has(kind):
    host = kind({
        "gpufleet_provider": "aws", "gpufleet_spot": True, "gpufleet_instance_id": "i-0abc",
        "gpufleet_gpu": {"model": "A10G", "count": 0.5, "memory_mib": 24576}, "gpufleet_public_ip": None,
        "gpufleet_textfile_dir": "/srv/textfile", "gpufleet_site_gpu_stack": False,
        # Not the node's: a lab path, a batch size, connection settings.
        "gpufleet_lab_dir": "/home/ops/.lab", "gpufleet_serial": "25%", "ansible_host": "10.0.0.5",
        "backup_password": "secret",
    })
    got = node_vars_filter.node_vars(host)
    assert got == {"gpufleet_provider": "aws", "gpufleet_spot": True, "gpufleet_instance_id": "i-0abc",
                   "gpufleet_gpu": {"model": "A10G", "count": 0.5, "memory_mib": 24576},
                   "gpufleet_public_ip": None, "gpufleet_textfile_dir": "/srv/textfile",
                   "gpufleet_site_gpu_stack": False}
    # A host the inventory says nothing about gets nothing, so the roles'
    # defaults apply as in a push run.
    assert node_vars_filter.node_vars(kind()) == {}


def test_the_filter_refuses_what_is_not_a_hosts_variables():
    with pytest.raises(Exception, match="hostvars\\[inventory_hostname\\]"):
        node_vars_filter.node_vars(["gpufleet_provider"])


def test_pull_yml_hands_the_list_to_the_node():
    play = yaml.safe_load((ROOT / "playbooks" / "pull.yml").read_text())[0]
    passed = play["roles"][0]["vars"]["pull_extra_vars"]
    assert "hostvars[inventory_hostname] | gpufleet.cloud.node_vars" in " ".join(passed.split()), passed
