"""bench.molecule: the podman driver's create and destroy against the
scenarios' shared ones, on the platforms Molecule's config gives; the
table takes the median round of each and the ratio within the run."""

from __future__ import annotations

import pytest

bench = pytest.importorskip("bench.molecule.__main__")


def test_the_table_takes_the_median_round_and_the_ratio():
    figures = {
        "driver": {"create": [(12.0, 3.0), (10.0, 2.0), (30.0, 4.0)], "destroy": [(6.0, 1.0)] * 3},
        "gpufleet": {"create": [(4.0, 1.5), (5.0, 1.0), (4.5, 1.2)], "destroy": [(0.5, 0.4)] * 3},
    }
    text = bench.table(figures, 3)
    assert "| create | 12.0 | 4.5 | 2.67 | 3.0 | 1.2 |" in text
    assert "| destroy | 6.0 | 0.5 | 12.00 | 1.0 | 0.4 |" in text


def test_both_alternatives_have_both_playbooks():
    for where in (bench.DRIVER, bench.OURS):
        assert (where / "create.yml").is_file() and (where / "destroy.yml").is_file(), where


def test_the_platforms_are_the_scenarios_keys_only():
    # Every key the shared create.yml reads, nothing it would ignore.
    known = {"name", "image", "pre_build_image", "command", "systemd", "hostname", "groups", "published_ports",
             "privileged", "capabilities", "extra_opts"}
    for platform in bench.PLATFORMS:
        assert set(platform) <= known, set(platform) - known
