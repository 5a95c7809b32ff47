"""A self-contained HTML page: fleet summary, grouping by cloud, region and
GPU model, the most drifted resources, peer mismatches, and a per-host
drill-down with diffs. No external assets, so it can be mailed or archived."""

from __future__ import annotations

import difflib
from html import escape

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{margin:0 0 4px}h2{margin-top:28px;border-bottom:1px solid #ddd}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;padding:10px 16px}
.card b{display:block;font-size:24px}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}
.in-sync{color:#17703a}.drifted{color:#b35900}.failed,.unreachable{color:#b00020}.could-not-verify{color:#666}
details{margin:6px 0}summary{cursor:pointer}pre{background:#f6f6f6;padding:8px;overflow:auto}
.add{color:#17703a}.del{color:#b00020}
"""


def _diff_html(record) -> str:
    diff = record.get("diff")
    if diff is None:
        return ""
    if isinstance(diff, str):
        return f"<pre>{escape(diff)}</pre>"
    out = []
    for d in diff:
        if "before" in d or "after" in d:
            lines = difflib.unified_diff(
                str(d.get("before", "")).splitlines(), str(d.get("after", "")).splitlines(),
                d.get("before_header", "before"), d.get("after_header", "after"), lineterm="")
            body = []
            for line in lines:
                cls = "add" if line.startswith("+") else "del" if line.startswith("-") else ""
                body.append(f'<span class="{cls}">{escape(line)}</span>')
            out.append("<pre>" + "\n".join(body) + "</pre>")
        elif "prepared" in d:
            out.append(f"<pre>{escape(d['prepared'])}</pre>")
    return "".join(out)


def _grouping(report, key, title) -> str:
    rows = "".join(
        f"<tr><td>{escape(value)}</td>"
        + "".join(f"<td class='{s}'>{states.get(s, 0)}</td>" for s in ("in-sync", "drifted", "failed", "unreachable"))
        + "</tr>"
        for value, states in report.grouped(key).items()
    )
    return (f"<h3>By {title}</h3><table><tr><th>{title}</th><th>in sync</th><th>drifted</th>"
            f"<th>failed</th><th>unreachable</th></tr>{rows}</table>")


def html(report) -> str:
    counts = report.counts()
    drifted_hosts = [h for h in report.hosts if report.host_state(h) == "drifted"]
    cards = [
        ("nodes in sync", f"{report.in_sync_percent():.0f}%"),
        ("nodes", len(report.hosts)),
        ("drifted nodes", len(drifted_hosts)),
        ("drifted resources", counts.get("drifted", 0)),
        ("failed", counts.get("failed", 0)),
        ("unreachable", counts.get("unreachable", 0)),
        ("coverage", f"{report.coverage_percent():.1f}%"),
    ]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>gpufleet drift</title>"
             f"<style>{CSS}</style></head><body>",
             "<h1>gpufleet drift report</h1>",
             f"<p>{escape(report.started)} to {escape(report.finished)} &middot; exit code {report.exit_code()}</p>",
             "<div class='cards' id='summary'>"
             + "".join(f"<div class='card'><b>{escape(str(v))}</b>{escape(k)}</div>" for k, v in cards)
             + "</div>"]
    if drifted_hosts:
        parts.append("<p id='drifted-nodes'>Drifted: " + ", ".join(escape(h) for h in sorted(drifted_hosts)) + "</p>")
    parts.append("<h2>Most drifted resources</h2>")
    top = report.most_drifted()
    parts.append("<table><tr><th>resource</th><th>nodes</th></tr>"
                 + "".join(f"<tr><td>{escape(r)}</td><td>{n}</td></tr>" for r, n in top) + "</table>"
                 if top else "<p>None.</p>")
    parts.append("<h2>Fleet</h2>" + _grouping(report, "provider", "cloud") + _grouping(report, "region", "region")
                 + _grouping(report, "gpu_model", "GPU model"))
    if report.peers:
        parts.append("<h2>Peer mismatches</h2><ul>"
                     + "".join(f"<li>{escape(p['host'])}: {escape(p['message'])} (group {escape(p['group'])})</li>"
                               for p in report.peers) + "</ul>")
    parts.append("<h2>Hosts</h2>")
    for host in sorted(report.hosts):
        state = report.host_state(host)
        records = [r for r in report.records if r["host"] == host and r["state"] != "in-sync"]
        parts.append(f"<details{' open' if state != 'in-sync' else ''}><summary><b>{escape(host)}</b> "
                     f"<span class='{state}'>{state}</span> ({len(records)} not in sync)</summary><ul>")
        for r in records:
            extra = ""
            if r.get("waiver"):
                extra = f" &middot; waived until {escape(r['waiver']['expires'])}: {escape(r['waiver']['reason'])}"
            if r.get("first_seen"):
                extra += f" &middot; first seen {escape(r['first_seen'])}"
            msg = f"<pre>{escape(r['message'])}</pre>" if r.get("message") else ""
            parts.append(f"<li><span class='{r['state']}'>{r['state']}</span> {escape(r['resource'])}{extra}"
                         f"{_diff_html(r)}{msg}</li>")
        parts.append("</ul></details>")
    parts.append("</body></html>")
    return "\n".join(parts)
