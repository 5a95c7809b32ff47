"""The drift runner's ansible-playbook runs: which playbook, options and
ansible.cfg."""

from pathlib import Path

from gpufleet import _ansible
from gpufleet.drift import _runner


class Result:
    rc, status = 0, "successful"


def captured_env(monkeypatch):
    seen = {}

    def run(**kwargs):
        seen.update(kwargs)
        return Result()

    monkeypatch.setattr(_ansible.ansible_runner, "run", run)
    return seen


def test_uses_the_projects_config_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    seen = captured_env(monkeypatch)
    _runner.scan(tmp_path, "inventories/lab", tmp_path / "report.json", quiet=True)
    assert seen["envvars"]["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert seen["envvars"]["ANSIBLE_CALLBACKS_ENABLED"] == "gpufleet.cloud.drift"
    assert seen["cmdline"] == "--check --diff"


def test_honours_a_config_the_caller_chose(monkeypatch, tmp_path):
    chosen = tmp_path / "other.cfg"
    monkeypatch.setenv("ANSIBLE_CONFIG", str(chosen))
    seen = captured_env(monkeypatch)
    _runner.fix(tmp_path, "inventories/lab", ["a", "b"], ["baseline"], quiet=True)
    assert seen["envvars"]["ANSIBLE_CONFIG"] == str(chosen)
    assert seen["limit"] == "a,b" and seen["tags"] == "baseline"
    assert Path(seen["playbook"]) == tmp_path / "site.yml"
