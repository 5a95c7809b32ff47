"""JUnit XML: one test suite per host, one test case per resource, so CI
systems show drift like failing tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def junit(report) -> str:
    return "".join(junit_parts(report))


def junit_parts(report):
    """The document in pieces, one host's suite at a time: a fleet of
    10,000 hosts has a million test cases, which as one element tree
    would take gigabytes."""
    yield "<?xml version='1.0' encoding='utf-8'?>\n"
    by_host: dict[str, list[dict]] = {}
    for r in report.records:
        by_host.setdefault(r["host"], []).append(r)
    hosts = sorted(report.hosts)
    if not hosts:
        yield '<testsuites name="gpufleet drift" />'
        return
    yield '<testsuites name="gpufleet drift">\n'
    for host in hosts:
        suite = _suite(host, by_host.get(host, []))
        ET.indent(suite, space="  ", level=1)
        yield "  " + ET.tostring(suite, encoding="unicode").rstrip() + "\n"
    yield "</testsuites>"


def _suite(host: str, records: list[dict]):
    """One host's suite: a case per resource, then its counts."""
    suite = ET.Element("testsuite", name=host, tests=str(len(records)))
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
        elif r.get("pull"):
            # --from: a node whose report was not read is not in sync.
            errors += 1
            ET.SubElement(case, "error", message=r["pull"]).text = r.get("message", "")
        elif r["state"] in ("failed", "unreachable"):
            errors += 1
            ET.SubElement(case, "error", message=r["state"]).text = r.get("message", "")
        elif r["state"] == "could-not-verify":
            skipped += 1
            ET.SubElement(case, "skipped", message="could not verify in check mode")
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return suite


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
