from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet import _project, cli


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


@pytest.mark.parametrize("option", ["--gpu-stack", "--spot"])
@pytest.mark.parametrize("value", ["-1", "one"])
def test_lab_up_rejects_bad_counts_naming_the_option(option, value, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lab", "up", option, value])
    assert exc.value.code == 1
    assert option in capsys.readouterr().err


def test_lab_up_refuses_more_gpu_stack_nodes_than_nodes(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path))
    assert cli.main(["lab", "up", "--nodes", "2", "--gpu-stack", "3"]) == 1
    assert "gpu_stack: must be a whole number between 0 and the node count 2, got 3" in capsys.readouterr().err
    assert cli.main(["lab", "up", "--nodes", "2", "--spot", "3"]) == 1
    assert "spot: must be a whole number between 0 and the node count 2, got 3" in capsys.readouterr().err


def test_project_root_finds_galaxy_yml_upwards(tmp_path):
    (tmp_path / "galaxy.yml").write_text("namespace: x\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert cli.project_root(deep) == tmp_path
    assert _project.find_checkout(deep) == tmp_path


def test_lab_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path / "elsewhere"))
    assert cli.lab_dir() == tmp_path / "elsewhere"


def test_version_prints_the_installed_version(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    # The version, and which package runs: an installed CLI and a
    # checkout's can both be on one machine.
    package = Path(cli.__file__).resolve().parent
    assert capsys.readouterr().out.strip() == f"gpufleet {metadata.version('gpufleet')} from {package}"


def test_version_says_unknown_when_not_installed(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert cli.version().startswith("unknown")


# Root and collection discovery (gpufleet/_project.py): a checkout, an
# installed collection, neither.

def installed_collection(base: Path) -> Path:
    """What `ansible-galaxy collection install -p base` leaves: the files
    discovery looks at."""
    root = base / "ansible_collections" / "gpufleet" / "cloud"
    (root / "playbooks").mkdir(parents=True)
    (root / "playbooks" / "drift.yml").write_text("---\n")
    (root / "MANIFEST.json").write_text(json.dumps({"collection_info": {"namespace": "gpufleet", "name": "cloud"}}))
    return root


def test_inside_a_checkout_the_checkout_is_the_project(tmp_path):
    (tmp_path / "galaxy.yml").write_text("namespace: gpufleet\n")
    (tmp_path / "sub").mkdir()
    elsewhere = installed_collection(tmp_path / "elsewhere")
    project = _project.locate(tmp_path / "sub", paths=[str(elsewhere.parents[2])])
    assert project == _project.Project(collection=tmp_path, workdir=tmp_path, checkout=True)
    assert _project.default_lab_dir(_project.find_checkout(tmp_path / "sub")) == tmp_path / ".lab"


def test_outside_a_checkout_the_first_installed_collection_on_the_paths_is_used(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    first = installed_collection(tmp_path / "first")
    installed_collection(tmp_path / "second")
    # Ansible accepts a path entry that names ansible_collections itself too.
    paths = [str(tmp_path / "empty"), str(first.parents[1]), str(tmp_path / "second")]
    project = _project.locate(cwd, paths=paths)
    assert project.collection == first and not project.checkout
    # Reports and the waiver file belong to where the user works, never
    # inside the installed collection.
    assert project.workdir == cwd
    assert project.collections_path == tuple(paths)


def test_outside_a_checkout_the_lab_dir_is_the_users_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUFLEET_LAB_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert _project.default_lab_dir(None) == tmp_path / "data" / "gpufleet" / "lab"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _project.default_lab_dir(None) == tmp_path / "home" / ".local" / "share" / "gpufleet" / "lab"


def test_a_directory_without_the_playbooks_is_not_the_collection(tmp_path):
    half = tmp_path / "ansible_collections" / "gpufleet" / "cloud"
    half.mkdir(parents=True)
    (half / "MANIFEST.json").write_text("{}")
    with pytest.raises(_project.CollectionNotFound):
        _project.locate(tmp_path, paths=[str(tmp_path)])


def test_outside_a_checkout_without_a_collection_the_error_says_what_to_install(tmp_path):
    with pytest.raises(_project.CollectionNotFound) as exc:
        _project.locate(tmp_path, paths=[str(tmp_path / "a"), str(tmp_path / "b")])
    message = str(exc.value)
    assert f"no galaxy.yml in {tmp_path} or above" in message
    assert f"{tmp_path / 'a'}:{tmp_path / 'b'}" in message
    assert "ansible-galaxy collection install gpufleet-cloud-" in message
    assert "ANSIBLE_COLLECTIONS_PATH" in message


def test_configured_paths_follow_ansible_collections_path(monkeypatch, tmp_path):
    from ansible import constants as C

    monkeypatch.setattr(C, "COLLECTIONS_PATHS", [str(tmp_path / "one"), "~/two"])
    monkeypatch.setattr(C, "COLLECTIONS_SCAN_SYS_PATH", False)
    assert _project.configured_collection_paths() == [str(tmp_path / "one"), str(Path("~/two").expanduser())]


def test_drift_outside_a_checkout_without_a_collection_exits_1_naming_it(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inv").mkdir()
    monkeypatch.setattr(_project, "configured_collection_paths", lambda: [str(tmp_path / "nowhere")])
    assert cli.main(["drift", "-i", "inv"]) == 1
    err = capsys.readouterr().err
    assert "gpufleet drift: no gpufleet checkout" in err and "ansible-galaxy collection install" in err


def test_lab_up_outside_a_checkout_without_a_collection_starts_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUFLEET_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setattr(_project, "configured_collection_paths", lambda: [str(tmp_path / "nowhere")])

    def no_lab(*args, **kwargs):
        raise AssertionError("lab up went ahead without the collection's lab inventory")

    monkeypatch.setattr(cli.Lab, "up", no_lab)
    assert cli.main(["lab", "up", "-n", "1"]) == 1
    assert "gpufleet lab up: no gpufleet checkout" in capsys.readouterr().err


def test_without_any_collection_the_cli_starts_and_drift_names_what_to_install(tmp_path):
    # A fresh process: the drift model is loaded when gpufleet.cli is
    # imported, from the collection Ansible is configured with, and here
    # there is none (no checkout above tmp_path, an empty collections path).
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(HOME=str(tmp_path), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "none"), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="0")

    def gpufleet(*args):
        return subprocess.run([sys.executable, "-m", "gpufleet", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60, check=False)

    assert gpufleet("lab", "--help").returncode == 0
    drift = gpufleet("drift", "-i", "inventory")
    assert drift.returncode == 1, drift.stderr
    assert "gpufleet drift: gpufleet drift reads its reports with the gpufleet.cloud collection" in drift.stderr
    assert f"Ansible's collection paths ({tmp_path / 'none'})" in drift.stderr
    assert "ansible-galaxy collection install gpufleet-cloud-" in drift.stderr
    assert "Traceback" not in drift.stderr
