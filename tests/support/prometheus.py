"""A real Prometheus server for tests: Debian's prometheus binary (unpacked
by tools/prometheus-tools.sh) on a free port of 127.0.0.1, with a given
scrape configuration, stopped afterwards. Used by the monitoring Molecule
scenario and by the lab tests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.ports import free_port

BINARY = Path(__file__).resolve().parents[2] / ".cache" / "tools" / "prometheus" / "prometheus"


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def api(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as resp:
            body = json.loads(resp.read().decode())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]


@contextlib.contextmanager
def serve(work: Path, job: str, targets: list[str], rule_files=(), binary: Path = BINARY, timeout: float = 60):
    """Yield a Prometheus that scrapes `targets` every second as `job`, once
    every target is up; raise AssertionError with its log if they are not
    within `timeout` seconds."""
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: {json.dumps([str(f) for f in rule_files])}\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
    )
    port = free_port()
    log = work / "prometheus.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [str(binary), f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if len(server.query(f'up{{job="{job}"}} == 1')) == len(targets):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"Prometheus did not scrape all of {targets} within {timeout:.0f}s:\n"
                                     + log.read_text()[-3000:])
            time.sleep(0.5)
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=30)
