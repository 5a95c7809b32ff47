"""The clouds are defined once, in module_utils/_clouds.py: every part of
the collection that names them names exactly those. Python reads the
registry; role YAML cannot import it, so this test reads every role's
argument_specs, vars and defaults, the playbooks and the role tasks, and
fails naming the file and the set where they name another. The guard's
node-side tables are checked beside its script
(tests/unit/roles/guard/files/test_gpufleet_guard_stop.py)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.cloud.plugins.module_utils import _clouds, _gpu_catalogue, _kms_client
from ansible_collections.gpufleet.cloud.plugins.modules import gpu_instance_info

ROOT = Path(__file__).resolve().parents[4]
CLOUDS = set(_clouds.CLOUDS)
# Tables keyed by cloud that may leave some out, and why.
PARTIAL = {
    # Huawei Cloud gives no spot notice inside the instance (docs/guard.md).
    "__guard_spot_notice_seconds_by_cloud",
}
# A list of two or more quoted cloud names written into a Jinja expression.
_INLINE = re.compile(r"\[\s*'(?:aliyun|tencent|huawei|aws)'(?:\s*,\s*'(?:aliyun|tencent|huawei|aws)')+\s*\]")


def test_the_registry_lists_each_cloud_once_with_its_name():
    assert len(_clouds.CLOUDS) == len(CLOUDS) == 4
    assert set(_clouds.NAMES) == CLOUDS
    assert _clouds.listed() == "aliyun, tencent, huawei or aws"


def test_python_that_names_the_clouds_names_the_registrys():
    assert set(_gpu_catalogue.CATALOGUE) == CLOUDS
    assert set(_kms_client.ADAPTERS) == CLOUDS
    assert set(gpu_instance_info.CREDENTIAL_NAMES) == CLOUDS


def test_each_cloud_has_one_discovery_adapter_and_one_inventory_plugin():
    adapters = {}
    for path in sorted((ROOT / "plugins/module_utils").glob("_discovery_*.py")):
        module = importlib.import_module("ansible_collections.gpufleet.cloud.plugins.module_utils." + path.stem)
        found = [c for c in vars(module).values() if isinstance(c, type) and isinstance(getattr(c, "provider", None), str)
                 and c.__module__ == module.__name__]
        assert len(found) == 1, f"{path.name}: expected one adapter class, found {found}"
        adapters[found[0].provider] = found[0]
    assert set(adapters) == CLOUDS
    plugins = {}
    for path in sorted((ROOT / "plugins/inventory").glob("*.py")):
        module = importlib.import_module("ansible_collections.gpufleet.cloud.plugins.inventory." + path.stem)
        plugins[path.stem] = module.InventoryModule.adapter_class(None).provider
    assert sorted(plugins.values()) == sorted(CLOUDS), plugins


def _cloud_tables(node, where):
    """(where, the set) for each list of cloud names and each mapping keyed
    by them in parsed YAML."""
    if isinstance(node, dict):
        keys = {k for k in node if isinstance(k, str)}
        if len(keys & CLOUDS) >= 2 and keys <= CLOUDS:
            yield where, keys
        for key, value in node.items():
            yield from _cloud_tables(value, "%s.%s" % (where, key))
    elif isinstance(node, list):
        items = {v for v in node if isinstance(v, str) and v}
        if len(items & CLOUDS) >= 2 and items <= CLOUDS:
            yield where, items
        for value in node:
            yield from _cloud_tables(value, where)


def _yaml_files():
    patterns = ("roles/*/meta/argument_specs.yml", "roles/*/vars/*.yml", "roles/*/defaults/*.yml", "playbooks/*.yml")
    return [p for pattern in patterns for p in sorted(ROOT.glob(pattern))]


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_role_yaml_names_every_cloud_or_says_why_not(path):
    for where, found in _cloud_tables(yaml.safe_load(path.read_text()), path.name):
        if where.rsplit(".", 1)[-1] in PARTIAL:
            continue
        assert found == CLOUDS, f"{path.relative_to(ROOT)} {where}: {sorted(found)}, the registry has {sorted(CLOUDS)}"


def test_no_task_writes_the_clouds_into_an_expression():
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sorted(ROOT.glob("roles/*/tasks/*.yml"))
             for m in _INLINE.finditer(p.read_text())]
    assert not found, "read a checked list (vars) or the option's choices instead: " + "; ".join(found)


@pytest.mark.parametrize("text, fails", [
    ({"x": ["aws", "aliyun"]}, True),
    ({"x": ["", "aliyun", "tencent", "huawei", "aws"]}, False),
    ({"x": {"aws": 1, "tencent": 2, "huawei": 3}}, True),
    ({"__guard_spot_notice_seconds_by_cloud": {"aws": 1, "tencent": 2}}, False),
    ({"x": ["aws", "gcp"]}, False),  # not a list of clouds at all
])
def test_the_yaml_check_can_fail(text, fails):
    bad = [(w, f) for w, f in _cloud_tables(text, "t") if w.rsplit(".", 1)[-1] not in PARTIAL and f != CLOUDS]
    assert bool(bad) is fails
    assert bool(_INLINE.search("x in ['aws', 'aliyun']"))
