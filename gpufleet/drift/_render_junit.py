"""JUnit XML: one test suite per host, one test case per resource, so CI
systems show drift like failing tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def junit(report) -> str:
    suites = ET.Element("testsuites", name="gpufleet drift")
    by_host: dict[str, list[dict]] = {}
    for r in report.records:
        by_host.setdefault(r["host"], []).append(r)
    for host in sorted(report.hosts):
        records = by_host.get(host, [])
        suite = ET.SubElement(suites, "testsuite", name=host, tests=str(len(records)))
        failures = errors = skipped = 0
        for r in sorted(records, key=lambda r: r["resource"]):
            case = ET.SubElement(suite, "testcase", classname=host, name=r["resource"])
            if r["state"] == "drifted" and not r.get("waiver"):
                failures += 1
                ET.SubElement(case, "failure", message="drifted").text = _diff_text(r)
            elif r["state"] == "drifted":
                skipped += 1
                ET.SubElement(case, "skipped", message=f"waived until {r['waiver']['expires']}: "
                                                       f"{r['waiver']['reason']}")
            elif r["state"] in ("failed", "unreachable"):
                errors += 1
                ET.SubElement(case, "error", message=r["state"]).text = r.get("message", "")
            elif r["state"] == "could-not-verify":
                skipped += 1
                ET.SubElement(case, "skipped", message="could not verify in check mode")
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def _diff_text(record) -> str:
    diff = record.get("diff")
    if not diff:
        return ""
    if isinstance(diff, str):
        return diff
    parts = []
    for d in diff:
        for key in ("before_header", "before", "after_header", "after", "prepared"):
            if key in d:
                parts.append(f"--- {key}\n{d[key]}")
    return "\n".join(parts)
