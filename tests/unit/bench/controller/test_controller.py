"""bench.controller: the venv's interpreter against another, on the same
check-mode run; the table takes the median round of each and the ratios
within the run, and the other interpreter is found outside .venv, through
a shim to the interpreter itself."""

from __future__ import annotations

import os

import pytest

bench = pytest.importorskip("bench.controller.__main__")


def test_the_table_takes_the_median_round_and_the_ratios():
    figures = {"venv": [(30.0, 20.0, 40.0), (32.0, 22.0, 44.0), (31.0, 21.0, 42.0)],
               "other": [(40.0, 26.0, 50.0), (36.0, 25.0, 49.0), (38.0, 27.0, 52.0)]}
    text = bench.table(figures, {"venv": "3.11.2 /usr", "other": "3.11.7 /opt/py"}, 3)
    assert "| venv | 3.11.2 /usr | 31.0 | 21.0 | 42.0 |" in text
    assert "| other | 3.11.7 /opt/py | 38.0 | 26.0 | 50.0 |" in text
    assert "| ratio | | 1.23 | 1.24 | 1.19 |" in text


def test_the_other_python_is_found_outside_the_venv_and_through_a_shim(tmp_path, monkeypatch):
    venv_bin, shims = bench.ROOT / ".venv" / "bin", tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3"
    # A shim (as pyenv's) that hands over to the interpreter it stands for.
    shim.write_text(f"#!/bin/sh\nexec {os.path.realpath('/usr/bin/python3')} \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{shims}{os.pathsep}/usr/bin")
    assert bench.other_python() == os.path.realpath("/usr/bin/python3")


def test_no_python_outside_the_venv_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="no python3 on PATH outside .venv; name one with --python"):
        bench.other_python()


def test_fewer_than_one_round_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "--rounds must be at least 1" in capsys.readouterr().err
