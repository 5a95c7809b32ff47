"""The node-side library's textfile writer (textfile.py, on a node
gpufleet_textfile.py): the one place the Prometheus text format is written."""

from __future__ import annotations

import os

from ansible_collections.gpufleet.cloud.plugins.module_utils import textfile


def test_a_gauge_has_its_help_and_type_and_one_line_per_sample():
    assert textfile.gauge("x_up", "1 when up.", [({}, True)]) == ["# HELP x_up 1 when up.", "# TYPE x_up gauge", "x_up 1"]
    assert textfile.gauge("x", "h", [({"a": "1", "b": 2}, 3), ({"a": "2", "b": 3}, 4)])[2:] == [
        'x{a="1",b="2"} 3', 'x{a="2",b="3"} 4']


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
