"""playbooks/awx_config.yml without an AWX: every awx.awx task uses only
options its module documents, every file it names is in the project, and
every variable a credential type injects is one the cloud's SDK reads.

ansible-lint resolves the module names (awx.awx is unpacked by `make
collections`) but does not check their options, hence these tests."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
AWX = ROOT / ".collections" / "ansible_collections" / "awx" / "awx"
PLAY = yaml.safe_load((ROOT / "playbooks" / "awx_config.yml").read_text())[0]
# The package each cloud's inventory plugin reads its credentials through.
SDK = {"aliyun": "alibabacloud_credentials", "tencent": "tencentcloud", "huawei": "huaweicloudsdkcore"}


def documented_options(module: str) -> dict:
    path = AWX / "plugins" / "modules" / f"{module}.py"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make collections`")
    tree = ast.parse(path.read_text())
    doc = next(
        node.value.value for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION"
    )
    return yaml.safe_load(doc)["options"]


def awx_tasks():
    for task in PLAY["tasks"]:
        for key, args in task.items():
            if key.startswith("awx.awx."):
                yield task, key.removeprefix("awx.awx."), args


@pytest.mark.parametrize("task", [t["name"] for t, dummy, dummy2 in awx_tasks()])
def test_awx_tasks_use_only_documented_options(task):
    (found,) = [(m, a) for t, m, a in awx_tasks() if t["name"] == task]
    module, args = found
    options = documented_options(module)
    names = set(options) | {alias for spec in options.values() for alias in spec.get("aliases", [])}
    assert set(args) <= names, f"{module}: unknown options {set(args) - names}"
    for name, value in args.items():
        choices = options.get(name, {}).get("choices")
        if choices and isinstance(value, str) and "{{" not in value:
            assert value in choices, f"{module}.{name}: {value!r} not in {choices}"


def test_job_templates_run_playbooks_of_the_project():
    (task,) = [t for t, m, dummy in awx_tasks() if m == "job_template"]
    templates = {item["name"]: item for item in task["loop"]}
    for item in templates.values():
        assert (ROOT / item["playbook"]).is_file(), item["playbook"]
        assert item["job_type"] in documented_options("job_template")["job_type"]["choices"]
    assert templates["gpufleet drift"]["playbook"] == "playbooks/drift.yml"
    assert templates["gpufleet drift"]["job_type"] == "check"
    assert "awx_config_job_slices" in templates["gpufleet bootstrap sliced"]["slices"]
    (schedule,) = [a for dummy, m, a in awx_tasks() if m == "schedule"]
    assert schedule["unified_job_template"] == "gpufleet drift"


def test_inventory_sources_are_the_projects_inventory_files():
    clouds = PLAY["vars"]["__awx_config_cloud_types"]
    assert set(PLAY["vars"]["awx_config_clouds"]) == set(clouds)
    for cloud, spec in clouds.items():
        config = yaml.safe_load((ROOT / spec["inventory_file"]).read_text())
        # The plugin accepts a file only when its name ends with the plugin's.
        plugin = config["plugin"].removeprefix("gpufleet.cloud.")
        assert spec["inventory_file"].endswith(f"{plugin}.yml"), cloud


@pytest.mark.parametrize("cloud", sorted(SDK))
def test_credential_types_inject_what_the_sdk_reads(cloud):
    spec = PLAY["vars"]["__awx_config_cloud_types"][cloud]
    fields = {field["id"]: field for field in spec["inputs"]["fields"]}
    sdk = Path(importlib.util.find_spec(SDK[cloud]).submodule_search_locations[0])
    sdk_source = "\n".join(path.read_text(errors="replace") for path in sdk.rglob("*.py"))
    for variable, template in spec["injectors"]["env"].items():
        # AWX refuses ANSIBLE_* variables from credentials.
        assert not variable.startswith("ANSIBLE_")
        assert f'"{variable}"' in sdk_source or f"'{variable}'" in sdk_source, f"{SDK[cloud]} never reads {variable}"
        # Escaped in the playbook, so AWX gets {{ field }} to fill in.
        rendered = template.replace("{{ '{{' }}", "{{").replace("{{ '}}' }}", "}}")
        (field,) = re.findall(r"^\{\{ (\w+) \}\}$", rendered)
        assert field in fields, f"{variable} takes an undefined input {field}"
    for name in spec["inputs"]["required"]:
        assert name in fields
    # Secret keys and tokens are secret: AWX encrypts them and never shows
    # them again. Key IDs are not, so an admin can tell credentials apart.
    for field in fields.values():
        secret = field["id"] in ("access_key_secret", "secret_key", "security_token")
        assert field.get("secret", False) is secret, field["id"]


def test_secrets_are_never_logged():
    for task, module, args in awx_tasks():
        if module == "credential":
            assert task.get("no_log") is True, task["name"]
