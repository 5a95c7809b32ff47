"""The lab fleet end to end: up, a converge killed half-way, a converge over
real SSH that finishes the job, a next run with zero changes, down. This is
what `make demo` shows a new user, plus the interruption. The fleet and its
first converge are the session's (tests/integration/conftest.py), shared
with the drift tests."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.integration.conftest import LAB_HOSTS, SITE_CUT_AT
from tests.integration.helpers import gpufleet
from tests.support.nodes import ROOT, ansible_env, recap

# One lab fleet at a time: its node names, addresses and emulator ports are
# fixed, so with `pytest -n` these modules run on one worker.
pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("lab-fleet")]


def test_lab_nodes_are_reachable_only_on_loopback(lab):
    status = gpufleet("lab", "status")
    rows = status.stdout.splitlines()
    assert len(rows) == len(LAB_HOSTS), status.stdout
    for row in rows:
        _name, endpoint, state, _label, ssh = row.split()
        assert endpoint.startswith("127.0.0."), row
        assert state == "running" and ssh == "up", row
    ports = subprocess.run(
        ["podman", "ps", "--filter", "label=gpufleet.lab", "--format", "{{.Ports}}"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "0.0.0.0" not in ports, ports
    for endpoint in ("127.0.0.11:2201->22/tcp", "127.0.0.12:2202->22/tcp"):
        assert endpoint in ports, ports


def test_the_lab_is_discovered_through_the_aliyun_plugin(lab):
    graph = subprocess.run(
        [shutil.which("ansible-inventory"), "-i", "inventories/lab", "--list"],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=True,
    )
    data = json.loads(graph.stdout)
    nodes = sorted(LAB_HOSTS)
    for group in ("cloud_aliyun", "region_cn_hangzhou", "gpu_a10", "lab"):
        assert sorted(data[group]["hosts"]) == nodes, group
    hv = data["_meta"]["hostvars"]["lab-node-2"]

    def plain(value):
        # Values from the cloud API are marked unsafe, and --list shows the mark.
        return value["__ansible_unsafe"] if isinstance(value, dict) and "__ansible_unsafe" in value else value

    assert isinstance(hv["ansible_host"], dict), "API data must stay marked unsafe"
    assert (plain(hv["ansible_host"]), plain(hv["ansible_port"])) == ("127.0.0.12", 2202)
    assert plain(hv["gpufleet_provider"]) == "aliyun" and plain(hv["gpufleet_gpu"]["model"]) == "A10"
    assert plain(hv["gpufleet_private_ip"]) == "127.0.0.12"


def test_site_converges_after_an_interrupted_run_then_changes_nothing(first_converge):
    cut = first_converge.cut
    assert SITE_CUT_AT in cut and "PLAY RECAP" not in cut, cut[-3000:]

    first = first_converge.first
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr
    stats = recap(first.stdout)
    assert sorted(stats) == sorted(LAB_HOSTS)
    assert all(s["changed"] > 0 for s in stats.values()), "the cut-off run must have left work to do"

    second = first_converge.second
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr
    assert {h: s["changed"] for h, s in recap(second.stdout).items()} == dict.fromkeys(stats, 0)

    # The check-mode pass is the drift scan (site.yml in check and diff
    # mode): on the converged fleet it must find nothing to change.
    scan, report = first_converge.scan, first_converge.report
    assert scan.returncode == 0 and report, scan.stdout[-4000:] + scan.stderr
    assert sorted(report["hosts"]) == sorted(stats)
    assert [(r["host"], r["resource"], r["state"]) for r in report["records"] if r["state"] != "in-sync"] == []
    assert report["summary"]["in_sync_percent"] == 100.0


def test_nodes_were_reached_over_ssh_as_the_lab_user(lab):
    out = subprocess.run(
        [shutil.which("ansible"), "-i", "inventories/lab", "lab", "-m", "ansible.builtin.command", "-a", "id -un"],
        cwd=ROOT, env=ansible_env(), capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("gpufleet") == len(LAB_HOSTS), out.stdout
