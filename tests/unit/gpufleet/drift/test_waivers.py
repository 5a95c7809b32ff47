from __future__ import annotations

import datetime

import pytest

from gpufleet.drift import _waivers

from .helpers import rec


def write(tmp_path, text):
    path = tmp_path / "w.yml"
    path.write_text(text)
    return path


def test_waiver_accepts_matching_drift_until_it_expires(tmp_path):
    waivers = _waivers.load(write(tmp_path, """
waivers:
  - host: "lab-node-*"
    resource: "*chrony*"
    reason: testing a new NTP pool
    expires: 2026-12-31
"""))
    records = [rec("lab-node-2", "baseline : Configure chrony", "drifted"),
               rec("lab-node-2", "baseline : Install", "drifted")]
    _waivers.apply(records, waivers, today=datetime.date(2026, 12, 1))
    assert records[0]["waiver"]["reason"] == "testing a new NTP pool"
    assert "waiver" not in records[1]

    later = [rec("lab-node-2", "baseline : Configure chrony", "drifted")]
    _waivers.apply(later, waivers, today=datetime.date(2027, 1, 1))
    assert "waiver" not in later[0] and later[0]["waiver_expired"]["expires"] == "2026-12-31"


@pytest.mark.parametrize(("text", "message"), [
    ("waivers: nope", "expected a top-level 'waivers' list"),
    ("waivers:\n  - host: a\n    resource: b\n    reason: c\n", "missing expires"),
    ("waivers:\n  - {host: a, resource: b, reason: c, expires: soon}", "expires must be a date"),
    ("waivers:\n  - {host: a, resource: b, reason: ' ', expires: 2026-01-01}", "reason must not be empty"),
    ("waivers:\n  - {host: a, resource: b, reason: c, expires: 2026-01-01, owner: me}", "unknown key(s) owner"),
    ("waivers: [", "not valid YAML"),
])
def test_bad_waiver_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(_waivers.WaiverError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _waivers.load(write(tmp_path, text))
