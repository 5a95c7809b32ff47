"""Small drift reports for tests, and a reader for the HTML report."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

from gpufleet.drift import Report


def rec(host, resource, state, role="gpufleet.cloud.baseline", **extra):
    return {"host": host, "resource": resource, "state": state, "role": role, **extra}


def report(records, hosts=None):
    hosts = hosts or {h: {"provider": "aliyun", "region": "cn-beijing", "gpu_model": "H100", "groups": ["lab"],
                          "versions": {}} for h in sorted({r["host"] for r in records})}
    return Report(hosts=hosts, records=records, started="2026-11-30T06:00:00+00:00",
                  finished="2026-11-30T06:01:00+00:00")


class Page(HTMLParser):
    """What a rendered drift report shows, read back from its HTML or from
    Chromium's --dump-dom: the grid's cells, its rows, the ids and in-page
    links, and each host's section (text and diffs)."""

    def __init__(self, text: str):
        super().__init__()
        self.cells: dict[tuple[str, str], str] = {}  # (host, role) -> state
        self.titles: dict[tuple[str, str], str] = {}
        self.glyphs: dict[tuple[str, str], str] = {}
        self.rows: list[str] = []
        self.roles: list[str] = []
        self.ids: list[str] = []
        self.links: list[str] = []
        self.sections: dict[str, Section] = {}
        self._row = self._cell = self._section = self._diff = None
        self._in_head = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "thead":
            self._in_head = True
        elif tag == "th" and self._in_head and "role" in (a.get("class") or "").split():
            self.roles.append(a.get("title") or "")
        elif tag == "tr" and "data-host" in a:
            self._row = a["data-host"]
            self.rows.append(self._row)
        elif tag == "td" and self._row is not None and "data-role" in a:
            self._cell = (self._row, a["data-role"])
            self.cells[self._cell] = a.get("data-state")
            self.titles[self._cell] = a.get("title")
            self.glyphs[self._cell] = ""
        elif tag == "details" and "data-host" in a:
            self._section = self.sections[a["data-host"]] = Section(a.get("id"), [], [])
        elif tag == "pre" and self._section is not None and "diff" in (a.get("class") or "").split():
            self._diff = []

    def handle_endtag(self, tag):
        if tag == "thead":
            self._in_head = False
        elif tag == "tr":
            self._row = None
        elif tag == "td":
            self._cell = None
        elif tag == "details":
            self._section = None
        elif tag == "pre" and self._diff is not None:
            self._section.diffs.append("".join(self._diff))
            self._diff = None

    def handle_data(self, data):
        if self._cell is not None:
            self.glyphs[self._cell] += data
        if self._section is not None:
            self._section.parts.append(data)
        if self._diff is not None:
            self._diff.append(data)


@dataclasses.dataclass
class Section:
    id: str
    parts: list[str]
    diffs: list[str]

    @property
    def text(self) -> str:
        return "".join(self.parts)
