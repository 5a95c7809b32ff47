"""The node-side library's textfile writer (textfile.py, on a node
gpufleet_textfile.py): the one place the Prometheus text format is written."""

from __future__ import annotations

import os

from ansible_collections.gpufleet.cloud.plugins.module_utils import textfile


def test_a_gauge_has_its_help_and_type_and_one_line_per_sample():
    assert textfile.gauge("x_up", "1 when up.", [({}, True)]) == ["# HELP x_up 1 when up.", "# TYPE x_up gauge", "x_up 1"]
    assert textfile.gauge("x", "h", [({"a": "1", "b": 2}, 3), ({"a": "2", "b": 3}, 4)])[2:] == [
        'x{a="1",b="2"} 3', 'x{a="2",b="3"} 4']


def test_a_counter_is_written_as_a_gauge_is_with_its_own_type():
    assert textfile.counter("x_total", "Things.", [({"g": "a"}, 3)]) == [
        "# HELP x_total Things.", "# TYPE x_total counter", 'x_total{g="a"} 3']


def test_samples_keep_their_precision_and_unknown_is_nan_never_zero():
    samples = [({"k": "float"}, 1733400000.125), ({"k": "whole float"}, 600.0), ({"k": "int"}, 7),
               ({"k": "unknown"}, None), ({"k": "text"}, "1.500")]
    lines = textfile.gauge("t", "h", samples)
    assert lines[2:] == ['t{k="float"} 1733400000.125', 't{k="whole float"} 600.0', 't{k="int"} 7',
                         't{k="unknown"} NaN', 't{k="text"} 1.500']


def test_label_values_and_help_are_escaped():
    lines = textfile.gauge("e", 'a \\ b\nc "d"', [({"detail": 'a"b\\c\nd'}, 1)])
    assert lines[0] == '# HELP e a \\\\ b\\nc "d"'
    assert lines[2] == 'e{detail="a\\"b\\\\c\\nd"} 1'


def test_no_series_is_a_family_without_samples():
    assert textfile.gauge("none", "h", []) == ["# HELP none h", "# TYPE none gauge"]


def test_write_atomic_replaces_the_file_readable_by_all_and_can_make_its_directory(tmp_path):
    target = tmp_path / "new" / "m.prom"
    textfile.write_atomic(str(target), "a 1\n", make_dirs=True)
    textfile.write_atomic(str(target), "a 2\n")
    assert target.read_text() == "a 2\n" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(target.parent) == ["m.prom"]


def test_sample_text_writes_a_whole_number_as_an_integer_and_keeps_every_digit():
    # 80 GiB: "%g" would give 8.58993e+10.
    assert textfile.sample_text(80 * 2**30 * 1.0) == "85899345920"
    assert textfile.sample_text(1733400000.125) == "1733400000.125"
    assert textfile.sample_text(0.1 + 0.2) == "0.30000000000000004"
    assert textfile.sample_text(7) == "7" and textfile.sample_text(True) == "1"
    assert textfile.sample_text(600.0) == "600"
    # A count past what a float holds exactly stays exact.
    assert textfile.sample_text(2**53 + 1) == "9007199254740993"


def test_write_atomic_can_keep_the_file_private_and_synced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    target = tmp_path / "state.json"
    textfile.write_atomic(str(target), "{}", mode=0o600, sync=True)
    assert target.read_text() == "{}" and oct(target.stat().st_mode & 0o777) == "0o600"
    assert len(synced) == 1
    textfile.write_atomic(str(target), "{}")
    assert len(synced) == 1, "only a write that asks for it is synced"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    (tmp_path / "d").mkdir()
    target = tmp_path / "d" / "m.prom"
    target.write_text("a 1\n")

    def refuse(_src, _dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    try:
        textfile.write_atomic(str(target), "a 2\n")
    except OSError:
        pass
    else:
        raise AssertionError("the failure must reach the caller")
    assert target.read_text() == "a 1\n" and os.listdir(target.parent) == ["m.prom"]
