"""tools/role_docs.py: the option tables and test links it writes into each
role's README, the hand-written text it keeps, and --check (make lint)
failing on a README that no longer matches its role."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tools" / "role_docs.py"
spec = importlib.util.spec_from_file_location("role_docs", SCRIPT)
role_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(role_docs)

ODD_SPECS = """\
---
argument_specs:
  main:
    short_description: A role with O(odd_mode) and other C(odd) things
    options:
      odd_mode:
        type: str
        choices: [fast, "a|b"]
        default: fast
        description:
          - How it runs, C(fast) or the one
            with a pipe (C(a|b)). A second sentence
            that the table leaves out.
          - A second paragraph, also left out.
      odd_hosts:
        type: list
        elements: str
        default: [one, "two|three"]
        description: Hosts, e.g. C(one.example). Not this.
      odd_path:
        type: path
        required: true
        description: Where it goes, see C(/etc/odd.conf).
      odd_empty:
        type: str
        default: ""
        description: Empty by default <no tag>
      odd_untyped:
        description: No type given, so str.
  tidy:
    short_description: Another entry point
    options: {}
"""


def make_role(root: Path, name: str, specs: str | None = ODD_SPECS, readme: str | None = None) -> Path:
    role = root / "roles" / name
    (role / "meta").mkdir(parents=True)
    if specs is not None:
        (role / "meta" / "argument_specs.yml").write_text(specs)
    if readme is not None:
        (role / "README.md").write_text(readme)
    return role


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *args],
                          capture_output=True, text=True, check=False)


def table_rows(readme: str) -> dict[str, str]:
    """Option name -> its table row."""
    return {line.split("|")[1].strip().strip("`"): line
            for line in readme.splitlines() if line.startswith("| `")}


def test_the_checkout_readmes_match_their_roles():
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_odd_options_render_one_row_each_with_pipes_escaped(tmp_path):
    make_role(tmp_path, "odd", readme="# odd\n")
    assert run(tmp_path).returncode == 0
    readme = (tmp_path / "roles" / "odd" / "README.md").read_text()
    rows = table_rows(readme)
    # Multi-line description: its first sentence only, on one line, with a
    # pipe inside code escaped so the cell does not split.
    assert rows["odd_mode"] == (
        "| `odd_mode` | str | no | `fast` | `fast`, `a\\|b` | How it runs, `fast` or the one with a pipe (`a\\|b`). |")
    # List default in YAML/JSON flow style; element type; "e.g." ends no sentence.
    assert rows["odd_hosts"] == (
        '| `odd_hosts` | list of str | no | `["one", "two\\|three"]` |  | Hosts, e.g. `one.example`. |')
    # Required, no default: the default cell is empty; a period inside markup ends nothing.
    assert rows["odd_path"] == "| `odd_path` | path | yes |  |  | Where it goes, see `/etc/odd.conf`. |"
    # An empty default is shown as one, and < cannot open an HTML tag.
    assert rows["odd_empty"] == '| `odd_empty` | str | no | `""` |  | Empty by default &lt;no tag> |'
    assert rows["odd_untyped"].split(" | ")[1] == "str"
    # Every row has the header's six cells.
    for row in rows.values():
        assert row.replace("\\|", "").count("|") == 7, row
    assert "### Entry point `tidy`\n\nAnother entry point\n\nNo options." in readme
    assert "A role with `odd_mode` and other `odd` things" in readme


def test_hand_written_text_around_the_markers_is_kept(tmp_path):
    readme = tmp_path / "roles" / "kept" / "README.md"
    make_role(tmp_path, "kept", readme="# kept\n\nIntro by hand.\n")
    assert run(tmp_path).returncode == 0
    text = readme.read_text()
    assert text.startswith("# kept\n\nIntro by hand.\n\n<!-- BEGIN argument_specs -->")
    assert text.index("<!-- END argument_specs -->") < text.index("<!-- BEGIN tests -->")
    # Text added between and after the sections survives a second run.
    text = text.replace("<!-- BEGIN tests -->", "Between, by hand.\n\n<!-- BEGIN tests -->") + "\nOutro by hand.\n"
    readme.write_text(text)
    assert run(tmp_path).returncode == 0
    assert readme.read_text() == text
    assert run(tmp_path, "--check").returncode == 0


def test_check_names_a_stale_table_and_writes_nothing(tmp_path):
    role = make_role(tmp_path, "stale", readme="# stale\n")
    assert run(tmp_path).returncode == 0
    specs = role / "meta" / "argument_specs.yml"
    specs.write_text(specs.read_text().replace("default: fast", "default: slow"))
    before = (role / "README.md").read_text()
    out = run(tmp_path, "--check")
    assert out.returncode == 1
    assert "roles/stale/README.md: the argument_specs section does not match meta/argument_specs.yml" in out.stderr
    assert "run tools/role_docs.py" in out.stderr
    assert (role / "README.md").read_text() == before
    assert run(tmp_path).returncode == 0
    assert "`slow`" in (role / "README.md").read_text()
    assert run(tmp_path, "--check").returncode == 0


def test_check_names_every_missing_or_unmarked_readme(tmp_path):
    make_role(tmp_path, "absent")
    make_role(tmp_path, "unmarked", readme="# unmarked\n")
    out = run(tmp_path, "--check")
    assert out.returncode == 1
    assert "roles/absent/README.md: missing" in out.stderr
    assert "roles/unmarked/README.md: no <!-- BEGIN argument_specs --> section" in out.stderr
    assert not (tmp_path / "roles" / "absent" / "README.md").exists()
    # Without --check the missing README is created, titled from galaxy.yml.
    (tmp_path / "galaxy.yml").write_text("namespace: ns\nname: coll\n")
    assert run(tmp_path).returncode == 0
    assert (tmp_path / "roles" / "absent" / "README.md").read_text().startswith("# ns.coll.absent\n")


def test_broken_markers_and_bad_specs_name_the_file(tmp_path):
    make_role(tmp_path, "twice", readme="<!-- BEGIN tests -->\n<!-- BEGIN tests -->\n<!-- END tests -->\n")
    make_role(tmp_path, "nodesc", specs="argument_specs:\n  main:\n    options:\n      x: {type: str}\n", readme="")
    make_role(tmp_path, "badyaml", specs="argument_specs: [\n", readme="")
    out = run(tmp_path)
    assert out.returncode == 1
    assert "roles/twice/README.md: needs exactly one <!-- BEGIN tests --> followed by one <!-- END tests -->" in out.stderr
    assert ("roles/nodesc/meta/argument_specs.yml (entry point main): option x has no description"
            in out.stderr)
    assert "roles/badyaml/meta/argument_specs.yml: not valid YAML" in out.stderr


def test_a_role_without_argument_specs_says_so(tmp_path):
    make_role(tmp_path, "plain", specs=None, readme="")
    assert run(tmp_path).returncode == 0
    assert "has no `meta/argument_specs.yml`" in (tmp_path / "roles" / "plain" / "README.md").read_text()


def test_tests_section_links_only_paths_that_hold_tests(tmp_path):
    make_role(tmp_path, "full", readme="")
    (tmp_path / "extensions" / "molecule" / "full").mkdir(parents=True)
    (tmp_path / "extensions" / "molecule" / "full" / "molecule.yml").write_text("---\n")
    (tmp_path / "tests" / "integration" / "roles" / "full").mkdir(parents=True)
    (tmp_path / "tests" / "integration" / "roles" / "full" / "test_x.py").write_text("")
    # A unit test directory with no test module in it is no unit test.
    (tmp_path / "tests" / "unit" / "roles" / "full" / "files").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "roles" / "full" / "__init__.py").write_text("")
    # An internal role renamed with a leading underscore, tests under the old name.
    make_role(tmp_path, "_inner", readme="")
    (tmp_path / "tests" / "unit" / "roles" / "inner" / "files").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "roles" / "inner" / "files" / "test_y.py").write_text("")
    make_role(tmp_path, "bare", readme="")
    assert run(tmp_path).returncode == 0

    full = (tmp_path / "roles" / "full" / "README.md").read_text()
    assert ("- Molecule scenario (`make molecule SCENARIO=full`): "
            "[`extensions/molecule/full/`](../../extensions/molecule/full/)") in full
    assert "[`tests/integration/roles/full/`](../../tests/integration/roles/full/)" in full
    assert "tests/unit/roles/full" not in full
    inner = (tmp_path / "roles" / "_inner" / "README.md").read_text()
    assert "- Unit tests (`make unit`): [`tests/unit/roles/inner/`](../../tests/unit/roles/inner/)" in inner
    assert "No Molecule scenario, lab tests or unit tests" in (tmp_path / "roles" / "bare" / "README.md").read_text()

    # A scenario added later makes the README stale.
    (tmp_path / "extensions" / "molecule" / "bare").mkdir()
    (tmp_path / "extensions" / "molecule" / "bare" / "molecule.yml").write_text("---\n")
    out = run(tmp_path, "--check")
    assert out.returncode == 1
    assert "roles/bare/README.md: the tests section does not match the test paths that exist" in out.stderr


def test_first_sentence_and_markup():
    assert role_docs.first_sentence(["One. Two.", "Three."]) == "One."
    assert role_docs.first_sentence("No period at all") == "No period at all"
    assert role_docs.first_sentence("Ends at C(a.b) here! Not there.") == "Ends at C(a.b) here!"
    assert role_docs.markup_to_md("See L(the docs, https://x.test/a) and U(https://y.test) I(now) B(here)") == (
        "See [the docs](https://x.test/a) and <https://y.test> *now* **here**")
    assert role_docs.code_span("a`b") == "``a`b``"
    assert role_docs.value(3600) == "`3600`" and role_docs.value(True) == "`true`"
    assert role_docs.value({"b": 1, "a": "x"}) == '`{"a": "x", "b": 1}`'
    assert role_docs.markup_to_md("two\n   lines") == "two lines"
