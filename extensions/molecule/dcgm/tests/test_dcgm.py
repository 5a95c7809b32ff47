"""What a Debian 12 container converged by gpufleet.cloud.dcgm really has:
DCGM's host engine from the local mirror of NVIDIA's CUDA repository
(stand-in packages whose nv-hostengine answers with its version), pinned,
held and running as the pinned version; no dcgm-exporter, since the fleet's
GPU exporter is nvidia_smi; and the drop-in prepare.yml left moved aside."""

from __future__ import annotations

import json

from conftest import assert_dropin_moved_aside, assert_file, assert_package, assert_unit_running

CORE = "datacenter-gpu-manager-4-core"
CUDA = "datacenter-gpu-manager-4-cuda13"
# Asks the engine on its port; the stand-in answers with its version.
ASK_ENGINE = ("python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', 5555), timeout=5); "
              "print(s.recv(200).decode().strip())\"")


def test_dcgm_is_the_pinned_version_held_from_the_mirror(host):
    assert assert_package(host, CORE) == "1:4.4.1-1"
    assert assert_package(host, CUDA) == "1:4.4.1-1"
    assert {CORE, CUDA} <= set(host.check_output("apt-mark showhold").split())
    assert not host.package("datacenter-gpu-manager-4-cuda12").is_installed
    # The monitoring role's pins from before this role, which held 4.2.3, are gone.
    assert not host.file("/etc/apt/preferences.d/gpufleet-monitoring_dcgm").exists
    assert_file(host, "/etc/apt/preferences.d/gpufleet-dcgm", contains=("Pin: version 1:4.4.1-*\n",))
    assert_file(host, "/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources",
                contains=("URIs: http://127.0.0.1:8089/cuda/debian12/x86_64/\n",
                          "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-cuda.asc\n"))


def test_the_host_engine_runs_the_pinned_version_without_the_local_drop_in(host):
    assert_unit_running(host, "nvidia-dcgm")
    assert host.check_output(ASK_ENGINE) == "gpufleet test stand-in DCGM 1:4.4.1-1"
    assert_dropin_moved_aside(host, "nvidia-dcgm.service", "override.conf", "--port 5556")
    # The stand-in records each start's arguments: the last start is the
    # package's own command line, not the drop-in's.
    starts = host.file("/run/gpufleet-test-dcgm.log").content_string.splitlines()
    assert starts and starts[-1].endswith(" nv-hostengine -n"), starts


def test_the_dcgm_exporter_of_an_earlier_choice_is_gone(host):
    assert not host.file("/etc/systemd/system/gpufleet-dcgm-exporter.service").exists
    assert host.run("systemctl is-active gpufleet-dcgm-exporter").stdout.strip() != "active"
    assert not host.file("/etc/gpufleet/ports.d/dcgm.json").exists
    # Nothing else in the port declarations claims 9400.
    declared = host.run("cat /etc/gpufleet/ports.d/*.json 2>/dev/null").stdout
    assert all(p["port"] != 9400 for line in declared.splitlines() if line.strip().startswith("[")
               for p in json.loads(line))
