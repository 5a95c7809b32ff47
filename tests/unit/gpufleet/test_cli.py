from __future__ import annotations

import pytest

from gpufleet import cli


@pytest.mark.parametrize("value", ["0", "-2", "three"])
def test_lab_up_rejects_bad_node_counts_naming_the_option(value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lab", "up", "--nodes", value])
    assert exc.value.code == 1  # not 2, which means "drift" to callers
    assert "--nodes" in capsys.readouterr().err


def test_lab_up_rejects_unknown_debian_release(capsys):
    with pytest.raises(SystemExit):
        cli.main(["lab", "up", "--debian", "11"])
    assert "--debian" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "one"])
def test_lab_up_rejects_bad_gpu_stack_counts_naming_the_option(value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lab", "up", "--gpu-stack", value])
    assert exc.value.code == 1
    assert "--gpu-stack" in capsys.readouterr().err


def test_lab_up_refuses_more_gpu_stack_nodes_than_nodes(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path))
    assert cli.main(["lab", "up", "--nodes", "2", "--gpu-stack", "3"]) == 1
    assert "gpu_stack: must be a whole number between 0 and the node count 2, got 3" in capsys.readouterr().err


def test_project_root_finds_galaxy_yml_upwards(tmp_path):
    (tmp_path / "galaxy.yml").write_text("namespace: x\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert cli.project_root(deep) == tmp_path


def test_lab_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path / "elsewhere"))
    assert cli.lab_dir() == tmp_path / "elsewhere"


def test_version_prints_the_installed_version(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpufleet {metadata.version('gpufleet')}"


def test_version_says_unknown_when_not_installed(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert cli.version().startswith("unknown")
