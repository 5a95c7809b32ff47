from __future__ import annotations

import json

import pytest

from gpufleet.drift import load_report

from .helpers import rec, report


def test_exit_code_bits_and_percentages():
    r = report([
        rec("a", "x", "in-sync"), rec("a", "y", "in-sync"),
        rec("b", "x", "drifted"), rec("b", "y", "could-not-verify"),
        rec("c", "x", "failed"),
        rec("d", "(host)", "unreachable"),
    ])
    assert r.exit_code() == 2 | 4 | 8
    assert r.in_sync_percent() == 25.0
    assert [r.host_state(h) for h in "abcd"] == ["in-sync", "drifted", "failed", "unreachable"]
    # coverage: of the 5 judged records, 3 were verified (in-sync or drifted)
    assert r.coverage_percent() == pytest.approx(60.0)


def test_waived_drift_is_shown_but_does_not_count():
    r = report([rec("a", "x", "drifted", waiver={"reason": "r", "expires": "2099-01-01"})])
    assert r.exit_code() == 0
    assert r.host_state("a") == "in-sync"
    assert r.most_drifted() == [("x", 1)]


def test_fix_targets_short_role_names_and_drifted_hosts_only():
    r = report([rec("b", "x", "drifted"), rec("a", "y", "in-sync"),
                rec("c", "z", "drifted", role="gpufleet.cloud.nccl")])
    assert r.drifted_hosts() == ["b", "c"]
    assert r.drifted_roles() == ["baseline", "nccl"]


def test_fix_reaches_an_internal_role_through_the_roles_that_include_it():
    held = rec("a", "Hold [libnvidia-ml1]", "drifted", role="gpufleet.cloud._nvidia_packages")
    held["applied_by"] = ["gpufleet.cloud.nvidia_driver", "gpufleet.cloud.cuda"]
    r = report([held, rec("a", "x", "drifted")])
    assert r.drifted_roles() == ["baseline", "cuda", "nvidia_driver"]


def test_grouping_by_cloud():
    r = report([rec("a", "x", "in-sync"), rec("b", "x", "drifted")])
    assert r.grouped("provider") == {"aliyun": {"in-sync": 1, "drifted": 1}}


def test_load_report_rejects_unknown_states(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"version": 1, "hosts": {}, "records": [rec("a", "x", "sideways")]}))
    with pytest.raises(ValueError, match="unknown drift states"):
        load_report(path)


@pytest.mark.parametrize(("data", "message"), [
    ({"hosts": {}, "records": []}, "schema version None, but this code reads version 1"),
    ({"version": 2, "hosts": {}, "records": []}, "schema version 2"),
    ({"version": "1", "hosts": {}, "records": []}, "schema version '1'"),
    ({"version": 1, "records": []}, "without its 'hosts' dict"),
    ({"version": 1, "hosts": {}, "records": {}}, "without its 'records' list"),
    ({"version": 1, "hosts": {}, "records": ["in-sync"]}, "unknown drift states"),
    ([], "not a drift report"),
])
def test_load_report_refuses_what_it_cannot_read_and_says_why(tmp_path, data, message):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_report(path)


def test_the_cli_and_the_callback_share_one_model():
    from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _drift

    from gpufleet.drift import _model

    assert _model.STATES is _drift.STATES
    assert (_model.EXIT_DRIFT, _model.EXIT_FAILED, _model.EXIT_UNREACHABLE) == (2, 4, 8)
    assert report([rec("a", "x", "in-sync")]).to_dict()["version"] == _drift.SCHEMA_VERSION
