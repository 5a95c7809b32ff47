"""bench.fleet without a lab: the no-op check, the report and its ratios."""

import pytest

from bench.fleet import __main__ as fleet

RECAP = """PLAY RECAP *********
gpufleet-lab-1             : ok=120  changed=0    unreachable=0    failed=0    skipped=30   rescued=0    ignored=0
gpufleet-lab-2             : ok=120  changed={changed}    unreachable=0    failed=0    skipped=30   rescued=0    ignored=0
"""


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setattr(fleet, "CACHE", tmp_path)
    return tmp_path


def test_recap_reads_every_host(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(RECAP.format(changed=3))
    assert fleet.recap(log) == {
        "gpufleet-lab-1": {"ok": 120, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 30},
        "gpufleet-lab-2": {"ok": 120, "changed": 3, "unreachable": 0, "failed": 0, "skipped": 30},
    }


def playbook_recaps(monkeypatch, changed):
    """Every measured run "prints" RECAP with lab-node-2 at `changed`."""
    def measure(argv, env, log):
        log.write_text(RECAP.format(changed=changed))
        return {"rc": 0, "wall": 10.0, "cpu": 4.0}

    monkeypatch.setattr(fleet, "measure", measure)


def test_a_noop_converge_that_changed_something_is_not_a_figure(monkeypatch, cache, tmp_path):
    playbook_recaps(monkeypatch, changed=1)
    with pytest.raises(fleet.NotANoOp, match="gpufleet-lab-2"):
        fleet.converge((tmp_path / "ansible.cfg", {}), tmp_path, "noop", 2, require_noop=True)
    # The converge that brings nodes up may change things.
    result = fleet.converge((tmp_path / "ansible.cfg", {}), tmp_path, "first", 2, require_noop=False)
    assert result["tasks"] == 240
    # Skipped tasks cost the controller too: what a node evaluates is both.
    assert result["skipped"] == 60


def test_a_recap_missing_hosts_is_not_a_figure(monkeypatch, cache, tmp_path):
    playbook_recaps(monkeypatch, changed=0)
    with pytest.raises(fleet.NotANoOp, match="2 of 3 hosts"):
        fleet.converge((tmp_path / "ansible.cfg", {}), tmp_path, "noop", 3, require_noop=True)


def test_defaults_config_only_says_where_the_collections_are(tmp_path):
    path, extra = fleet.configs(tmp_path)["defaults"]
    assert extra == {}
    text = path.read_text()
    keys = [line.split("=")[0].strip() for line in text.splitlines() if "=" in line]
    assert keys == ["collections_path", "roles_path"]


def test_markdown_gives_ratios_from_the_same_run():
    def figures(wall):
        return {"rc": 0, "wall": wall, "cpu": 1.0, "tasks": 100}

    rows = [{"nodes": n, "first_converge": figures(100.0),
             "noop_gpufleet": figures(10.0 * n), "noop_defaults": figures(30.0 * n),
             "drift_gpufleet": figures(20.0 * n), "drift_defaults": figures(50.0 * n)} for n in (1, 8)]
    text = fleet.markdown({"when": "now", "cpus": 2, "python": "3", "ansible_core": "2", "rows": rows,
                           "configs": ["gpufleet", "defaults"]})
    assert "## defaults / gpufleet (wall, same run)\n\n- 1 node(s): no-op converge 3.00x, drift scan 2.50x" in text
    assert "linear" not in text
    assert "- gpufleet, 8 nodes: no-op converge 8.00x, drift scan 8.00x" in text


def test_linear_is_gpufleets_config_with_ansibles_strategy(tmp_path):
    path, extra = fleet.configs(tmp_path)["linear"]
    assert path == fleet.ROOT / "ansible.cfg"
    env = fleet.run_env((path, extra), tmp_path)
    assert env["ANSIBLE_STRATEGY"] == "ansible.builtin.linear"
    assert env["ANSIBLE_SSH_CONTROL_PATH_DIR"] == str(tmp_path)
    assert "ANSIBLE_STRATEGY" not in fleet.run_env(fleet.configs(tmp_path)["gpufleet"], tmp_path)


def test_bad_sizes_are_refused_before_anything_runs(monkeypatch, capsys):
    monkeypatch.setattr(fleet, "bench", lambda *a: pytest.fail("must not run"))
    with pytest.raises(SystemExit) as done:
        fleet.main(["--nodes", "8,1"])
    assert done.value.code == 2
    assert "--nodes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fleet.main(["--configs", "fast"])
