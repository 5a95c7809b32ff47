"""The execution environment for AWX (execution-environment.yml).

Building the image needs a registry and Galaxy, which our machines cannot
reach, so these tests stop at what `ansible-builder create` writes: the
Containerfile and its build context, made from a copy of the definition in a
temporary directory, exactly as `make ee-context` makes it in build/ee.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bindep.depends import Depends

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
EE_FILE = ROOT / "execution-environment.yml"
TARBALL = "build/ee/gpufleet-cloud.tar.gz"


def normal(name: str) -> str:
    """A Python distribution name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    """NAME==VERSION lines of a requirements file, by normalised name."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"{path.name}: {line!r} is not pinned"
            found[normal(name)] = version
    return found


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def definition() -> dict:
    return yaml.safe_load(EE_FILE.read_text())


@pytest.fixture(scope="module")
def context(tmp_path_factory, definition) -> Path:
    """`make ee-context` in a temporary copy: the definition and the files it
    names, the collection tarball, then `ansible-builder create`. Returns the
    context's _build directory."""
    work = tmp_path_factory.mktemp("ee")
    referenced = [v for v in definition["dependencies"].values() if isinstance(v, str)]
    referenced += [f["src"] for f in definition["additional_build_files"] if f["src"] != TARBALL]
    for rel in ["execution-environment.yml", *referenced]:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, work / rel)
    out = work / "build" / "ee"
    run(str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT), cwd=work)
    (built,) = out.glob("gpufleet-cloud-*.tar.gz")
    built.rename(work / TARBALL)
    run(str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context", cwd=work)
    return work / "context" / "_build"


@pytest.fixture(scope="module")
def containerfile(context) -> str:
    return (context.parent / "Containerfile").read_text()


@pytest.fixture(scope="module")
def constraints() -> dict[str, str]:
    lines = (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
    return {normal(n): v for n, v in (line.split("==", 1) for line in lines if "==" in line)}


def test_the_containerfile_installs_everything_the_context_holds(containerfile):
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in containerfile
    # Python requirements and bindep go through builder's introspection and
    # assemble steps; the collections through ansible-galaxy.
    assert "COPY _build/requirements.txt requirements.txt" in containerfile
    assert "COPY _build/bindep.txt bindep.txt" in containerfile
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in containerfile
    assert "RUN /output/scripts/assemble" in containerfile
    assert "RUN /output/scripts/install-from-bindep" in containerfile
    assert re.search(r"ansible-galaxy collection install .*-r requirements\.yml", containerfile)
    # Every pip run is held to the project's exact versions, from the base
    # stage on (the later stages are built FROM base).
    base = containerfile.split("FROM base AS galaxy")[0]
    assert "COPY _build/constraints/constraints.txt /etc/gpufleet/ee-constraints.txt" in base
    assert "ENV PIP_CONSTRAINT=/etc/gpufleet/ee-constraints.txt" in base
    assert base.index("PIP_CONSTRAINT") < base.index("pip install --no-cache-dir $ANSIBLE_INSTALL_REFS")


def test_ansible_core_and_runner_are_the_tested_versions(containerfile, constraints):
    refs = re.search(r'ARG ANSIBLE_INSTALL_REFS="([^"]+)"', containerfile)[1].split()
    assert sorted(refs) == sorted(
        f"{name}=={constraints[name]}" for name in ("ansible-core", "ansible-runner")
    )


def test_the_python_requirements_hold_every_inventory_plugins_sdk(context, constraints):
    wanted = pins(context / "requirements.txt")
    for plugin in sorted((ROOT / "plugins" / "inventory").glob("*.py")):
        tree = ast.parse(plugin.read_text())
        doc = next(
            node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION"
        )
        for requirement in yaml.safe_load(doc)["requirements"]:
            assert normal(requirement) in wanted, f"{plugin.name} needs {requirement}"
    # Exactly the versions the tests ran with.
    assert {name: constraints.get(name) for name in wanted} == wanted
    assert (context / "constraints" / "constraints.txt").read_bytes() == (
        ROOT / "requirements" / "constraints.txt"
    ).read_bytes()


def test_bindep_gives_git_and_ssh_to_the_image_and_compilers_only_to_the_builder(context):
    depends = Depends((context / "bindep.txt").read_text())
    runtime = {rule[0] for rule in depends.active_rules(["platform:rpm", "platform:centos", "default"])}
    builder = {rule[0] for rule in depends.active_rules(["platform:rpm", "platform:centos", "compile"])}
    assert runtime == {"git-core", "openssh-clients"}
    assert {"gcc", "python3.12-devel"} <= builder - runtime


def test_the_collection_goes_in_from_this_checkout_with_pinned_dependencies(context, constraints, tmp_path):
    requirements = yaml.safe_load((context / "requirements.yml").read_text())["collections"]
    local = [c for c in requirements if c.get("type") == "file"]
    assert local == [{"name": "collections/gpufleet-cloud.tar.gz", "type": "file"}]
    # The rest are the versions `make collections` installs for the tests.
    tested = yaml.safe_load((ROOT / "requirements" / "collections.yml").read_text())["collections"]
    tested = {c["name"]: str(c["version"]) for c in tested}
    for entry in requirements:
        if entry not in local:
            assert tested.get(entry["name"]) == str(entry["version"]), entry["name"]
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert set(galaxy["dependencies"]) <= {c["name"] for c in requirements}

    # ansible-galaxy runs in the context's _build (/build in the image) and
    # resolves the relative path there. Galaxy itself is out of reach: only
    # the local entry is installed.
    only_local = tmp_path / "local.yml"
    only_local.write_text(yaml.safe_dump({"collections": local}))
    # --force: `make unit` exports the project's ansible.cfg, whose
    # collections path already holds this checkout as gpufleet.cloud.
    run(str(BIN / "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-r", str(only_local),
        "-p", str(tmp_path / "installed"), cwd=context)
    installed = tmp_path / "installed" / "ansible_collections" / "gpufleet" / "cloud"
    manifest = yaml.safe_load((installed / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["version"] == galaxy["version"]
    assert (installed / "plugins" / "inventory" / "aws_ec2.py").is_file()
    assert (installed / "playbooks" / "drift.yml").is_file()
    # Run-time leftovers stay out of the tarball.
    assert not (installed / ".gpufleet").exists() and not (installed / "build").exists()

    # Builder's own introspection finds the collection's declared
    # dependencies, so any EE that installs gpufleet.cloud gets the SDKs.
    found = run(sys.executable, str(context / "scripts" / "introspect.py"), "introspect",
                str(tmp_path / "installed"), cwd=tmp_path)
    declared = yaml.safe_load(found.stdout)
    assert f"boto3=={constraints['boto3']}  # from collection gpufleet.cloud" in declared["python"]
    assert "git-core [platform:rpm]  # from collection gpufleet.cloud" in declared["system"]
