"""The HTML report: its template, the hosts x roles grid, the per-host
sections, a fleet-sized page, and the page as Chromium builds it."""

from __future__ import annotations

import re
import shutil
import subprocess

import jinja2
import pytest

from gpufleet.drift import Report
from gpufleet.drift._render_html import _environment, context, html

from .helpers import Page, rec, report

CHRONY_DIFF = [{"before_header": "/etc/chrony/chrony.conf", "before": "server a\n", "after": "server b\n"}]
WAIVER = {"reason": "vendor image", "expires": "2027-01-31"}


def test_hostile_names_resources_and_diffs_are_escaped():
    host = '<script>alert("host")</script>'
    page = html(report([
        rec(host, "<img src=x onerror=alert(1)>", "drifted", role="evil.<b>role</b>",
            diff=[{"before_header": "<script>h</script>", "before": "a\n", "after": "</pre><script>d</script>\n"}]),
        rec(host, "x", "failed", message='"><script>m</script>'),
        rec(host, "y", "drifted", waiver={"reason": "<script>w</script>", "expires": "2027-01-01"}),
    ]))
    assert "<script" not in page and "<img" not in page and "<b>role" not in page
    assert "&lt;/pre&gt;&lt;script&gt;d&lt;/script&gt;" in page and "&lt;img src=x" in page
    shown = Page(page)
    # Attributes are escaped too: the host reads back whole, as one row.
    assert shown.rows == [host]
    assert shown.cells[(host, "<b>role</b>")] == "drifted"
    assert shown.cells[(host, "baseline")] == "failed"
    assert "+</pre><script>d</script>" in shown.sections[host].diffs[0]
    assert re.fullmatch(r"host-[A-Za-z0-9_.-]+", shown.sections[host].id)


def test_the_template_fails_on_a_missing_value():
    values = context(report([rec("h1", "r", "in-sync")]))
    del values["rows"][0]["anchor"]
    with pytest.raises(jinja2.UndefinedError):
        _environment().get_template("report.html.j2").render(values)


def test_grid_cells_carry_the_worst_state_of_each_host_and_role():
    records = [
        rec("h-drift", "baseline : a", "in-sync"),
        rec("h-drift", "baseline : b", "drifted", diff=CHRONY_DIFF),
        rec("h-drift", "security : a", "in-sync", role="gpufleet.cloud.security"),
        rec("h-fail", "baseline : a", "drifted"),
        rec("h-fail", "baseline : b", "failed", message="apt lock"),
        rec("h-fail", "monitoring : a", "in-sync", role="gpufleet.cloud.monitoring"),
        rec("h-fail", "monitoring : b", "could-not-verify", role="gpufleet.cloud.monitoring"),
        rec("h-waived", "baseline : a", "drifted", waiver=WAIVER),
        rec("h-waived", "security : a", "drifted", role="gpufleet.cloud.security", waiver=WAIVER),
        rec("h-waived", "security : b", "could-not-verify", role="gpufleet.cloud.security"),
        # A waiver that ran out is live drift again.
        rec("h-waived", "monitoring : a", "drifted", role="gpufleet.cloud.monitoring",
            waiver_expired={"reason": "old", "expires": "2026-01-01"}),
        rec("h-down", "baseline : a", "in-sync"),
        rec("h-down", "Gathering Facts", "unreachable", role=None, message="ssh: timed out"),
        rec("h-sync", "security : a", "in-sync", role="gpufleet.cloud.security"),
    ]
    hosts = {h: {"provider": "aliyun", "region": "cn-beijing", "gpu_model": "H100", "groups": []}
             for h in ("h-drift", "h-fail", "h-waived", "h-down", "h-sync", "h-empty")}
    shown = Page(html(report(records, hosts)))
    assert shown.roles == ["records without a role: the play's own tasks", "gpufleet.cloud.baseline",
                           "gpufleet.cloud.monitoring", "gpufleet.cloud.security"]
    assert shown.rows == ["h-down", "h-drift", "h-empty", "h-fail", "h-sync", "h-waived"]
    cells = {host: [shown.cells[(host, role)] for role in ("(play)", "baseline", "monitoring", "security")]
             for host in shown.rows}
    assert cells == {
        "h-drift": ["none", "drifted", "none", "in-sync"],
        "h-fail": ["none", "failed", "could-not-verify", "none"],
        "h-waived": ["none", "waived", "drifted", "could-not-verify"],
        "h-down": ["unreachable"] * 4,
        "h-sync": ["none", "none", "none", "in-sync"],
        "h-empty": ["none"] * 4,
    }
    # Readable without colour: a glyph and a title that names the state.
    assert shown.glyphs[("h-waived", "baseline")] == "W" and shown.glyphs[("h-fail", "baseline")] == "F"
    assert shown.titles[("h-fail", "monitoring")] == "h-fail \u00b7 monitoring: could not verify (2 records)"
    assert "unreachable host (recorded before: in sync)" in shown.titles[("h-down", "baseline")]
    # Each section lists what is not in sync, with why.
    fail = shown.sections["h-fail"].text
    assert "apt lock" in fail and "monitoring : b" in fail and "message: unknown" in fail
    assert "waived until 2027-01-31: vendor image" in shown.sections["h-waived"].text
    assert "-server a" in shown.sections["h-drift"].diffs[0] and "+server b" in shown.sections["h-drift"].diffs[0]
    assert "No resources recorded" in shown.sections["h-empty"].text


def _fleet(n_hosts=300, n_roles=14):
    """A fleet-shaped report: mixed states, some roles missing on some hosts,
    and fields missing as older or partial reports leave them."""
    roles = [f"gpufleet.cloud.role{i:02d}" for i in range(n_roles)]
    hosts, records = {}, []
    for h in range(n_hosts):
        host = f"gpu-{h % 3}.node {h}" if h % 50 == 7 else f"node-{h}"  # some names need a safe anchor
        hosts[host] = {} if h % 17 == 0 else {"provider": "aws", "region": None, "gpu_model": "H200"}
        if h % 101 == 5:
            records.append({"host": host, "resource": "Gathering Facts", "state": "unreachable", "role": None})
            continue
        for i, role in enumerate(roles):
            if (h + i) % 13 == 0:
                continue  # a role this host does not take
            state = ("drifted" if (h * 7 + i) % 23 == 0 else "failed" if (h + i * 5) % 97 == 0
                     else "could-not-verify" if (h + i) % 41 == 0 else "in-sync")
            r = {"host": host, "resource": f"{role} : task {i}", "state": state, "role": role}
            if state == "drifted":
                r["diff"] = ([{"before": f"v{h}\n", "after": f"v{h + 1}\n"}] if h % 2 else None)
                if h % 5 == 0:
                    r["waiver"] = {"reason": "accepted", "expires": None}
            elif state != "in-sync" and h % 3:
                r["message"] = None
            records.append(r)
        if h % 11 == 0:
            records.append({"host": host, "state": "could-not-verify", "diff": None})  # no resource, no role
    return Report(hosts=hosts, records=records)


def test_a_fleet_of_hundreds_renders_with_links_that_resolve():
    fleet = _fleet()
    page = html(fleet)
    shown = Page(page)
    assert len(shown.rows) == 300 and len(set(shown.rows)) == 300
    assert len(shown.roles) == 15  # 14 roles and the play's own records
    assert len(shown.cells) == 300 * 15
    assert set(shown.cells.values()) == {"none", "in-sync", "drifted", "waived", "failed", "could-not-verify",
                                         "unreachable"}
    assert len(shown.ids) == len(set(shown.ids))
    assert shown.links and set(shown.links) <= set(shown.ids)
    assert len(shown.sections) == 300
    # Missing values say so.
    assert "cloud unknown" in shown.sections["node-0"].text and "region unknown" in shown.sections["node-1"].text
    assert '<span class="resource">unknown</span>' in page  # the record without a resource
    assert "waived until unknown: accepted" in page
    assert "No diff recorded" in page and "message: unknown" in page


def _chromium_dom(page_path, profile):
    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed (tools/host-setup.sh installs it)")
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--dump-dom",
         page_path.as_uri()], capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_chromium_shows_the_grid_and_a_host_section_with_its_diff(tmp_path):
    page_path = tmp_path / "report.html"
    page_path.write_text(html(report([
        rec("lab-node-1", "gpufleet.cloud.baseline : Install", "in-sync"),
        rec("lab-node-2", "gpufleet.cloud.baseline : Configure chrony", "drifted", diff=CHRONY_DIFF),
        rec("lab-node-2", "gpufleet.cloud.security : Load the firewall", "in-sync", role="gpufleet.cloud.security"),
    ])))
    dom = _chromium_dom(page_path, tmp_path / "profile")
    shown = Page(dom)
    assert shown.rows == ["lab-node-1", "lab-node-2"]
    assert shown.cells == {("lab-node-1", "baseline"): "in-sync", ("lab-node-1", "security"): "none",
                           ("lab-node-2", "baseline"): "drifted", ("lab-node-2", "security"): "in-sync"}
    section = shown.sections["lab-node-2"]
    assert "Configure chrony" in section.text
    assert "-server a" in section.diffs[0] and "+server b" in section.diffs[0]
    assert set(shown.links) <= set(shown.ids)
    assert "Drifted: lab-node-2</p>" in dom
