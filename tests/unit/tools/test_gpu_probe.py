"""tools/gpu-probe against a stand-in nvidia-smi: what it writes, what it
compares, how it survives a missing or hanging nvidia-smi, and that it only
ever asks nvidia-smi read-only questions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.cloud.plugins.plugin_utils._role_inputs import OPTIONS_RENAMED

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "tools" / "gpu_probe.py"
FIXTURES = ROOT / "tests" / "unit" / "plugins" / "fixtures" / "nvidia_smi"
XML = FIXTURES / "h100_sxm_x2_r550.xml"
TOPO = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47\n"

# What h100_sxm_x2_r550.xml says, as --query-gpu answers it (node_health's
# own fields included, so its checks have something to check).
GPUS = [
    {"index": "0", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6a1c0f6e-3d2b-4c55-9e0f-1b2a3c4d5e60",
     "memory.total": "81559", "driver_version": "550.163.01", "pci.bus_id": "00000000:19:00.0"},
    {"index": "1", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70",
     "memory.total": "81559", "driver_version": "550.163.01", "pci.bus_id": "00000000:3B:00.0"},
]
HEALTHY = {"persistence_mode": "Enabled", "ecc.mode.current": "Enabled", "ecc.errors.uncorrected.volatile.total": "0",
           "pcie.link.gen.current": "5", "pcie.link.gen.max": "5", "pcie.link.width.current": "16",
           "pcie.link.width.max": "16", "pstate": "P0"}

# Logs its arguments, then answers as nvidia-smi would (or sleeps first).
STAND_IN = """\
import json, sys, time
SPEC = json.loads({spec!r})
args = sys.argv[1:]
with open(SPEC["log"], "a") as log:
    log.write(json.dumps(args) + "\\n")
time.sleep(SPEC["sleep"])
if args == ["-q", "-x"]:
    sys.stdout.write(SPEC["xml"])
elif args == ["topo", "-m"]:
    sys.stdout.write(SPEC["topo"])
elif args == ["nvlink", "-s"]:
    sys.stdout.write(SPEC["nvlink"])
elif args and args[0].startswith("--query-gpu="):
    asked = args[0].split("=", 1)[1].split(",")
    for gpu in SPEC["gpus"]:
        print(", ".join(gpu.get(field, "[N/A]") for field in asked))
else:
    sys.exit(2)
"""

# nvidia-smi's read-only forms: what the probe may ask, written down here
# apart from the probe's own list so the test does not trust it.
READ_ONLY = [["-q", "-x"], ["topo", "-m"], ["nvlink", "-s"]]


def read_only(args):
    return args in READ_ONLY or (
        len(args) == 2 and args[0].startswith("--query-gpu=") and args[1] == "--format=csv,noheader,nounits"
    )


def executable(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path):
    """A bin directory (the probe's whole PATH), a sysfs with the nvidia
    module loaded, and a way to put a stand-in nvidia-smi into it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    module = tmp_path / "sys" / "module" / "nvidia"
    module.mkdir(parents=True)
    (module / "version").write_text("550.163.01\n")
    log = tmp_path / "nvidia-smi.log"

    def smi(xml=None, gpus=None, sleep=0):
        spec = {
            "log": str(log), "sleep": sleep, "topo": TOPO,
            "xml": XML.read_text() if xml is None else xml,
            "nvlink": (FIXTURES / "nvlink_h100_x2.txt").read_text(),
            "gpus": [dict(g, **HEALTHY) for g in (GPUS if gpus is None else gpus)],
        }
        return executable(bin_dir / "nvidia-smi", STAND_IN.format(spec=json.dumps(spec)))

    return {"tmp": tmp_path, "bin": bin_dir, "sys": tmp_path / "sys", "log": log, "smi": smi}


def probe(machine, *args, timeout=60):
    """Run the probe; (exit code, report.json or None, stderr). Every
    nvidia-smi call it made must have been a read-only one."""
    out = machine["tmp"] / "out"
    proc = subprocess.run(
        [sys.executable, str(PROBE), "--out", str(out), "--sysfs", str(machine["sys"]), *args],
        env={"PATH": str(machine["bin"]), "LANG": "C.UTF-8"}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )
    calls = machine["log"].read_text().splitlines() if machine["log"].exists() else []
    assert all(read_only(json.loads(call)) for call in calls), calls
    report = out / "report.json"
    return proc.returncode, json.loads(report.read_text()) if report.exists() else None, proc.stderr


def commands(report, argv_tail):
    return [c for c in report["commands"] if c["argv"][1:] == argv_tail]


def test_happy_path_writes_the_capture_parses_it_and_agrees_with_query_gpu(machine):
    machine["smi"]()
    rc, report, err = probe(machine, "--expected-gpus", "2")
    assert rc == 0, err
    out = machine["tmp"] / "out"
    assert (out / "nvidia-smi-q-x.xml").read_text() == XML.read_text()
    assert (out / "nvidia-smi-topo-m.txt").read_text() == TOPO
    assert report["capture"] == {"status": "ok"}
    assert report["host"]["nvidia_module_version"] == "550.163.01"
    assert {"kernel", "os", "time_utc"} <= set(report["host"]) and report["probe"]["version"]
    (xml_run,) = commands(report, ["-q", "-x"])
    assert xml_run["exit_status"] == 0 and xml_run["timed_out"] is False
    assert xml_run["output"] == "nvidia-smi-q-x.xml" and xml_run["duration_s"] >= 0
    facts = report["gpu_facts"]["facts"]
    assert facts["count"] == 2 and {g["name"] for g in facts["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert len(facts["gpus"][0]["nvlinks"]) == 18
    assert report["comparison"]["status"] == "equal"
    assert len(report["comparison"]["rows"]) == 12
    assert all(row["equal"] == "yes" for row in report["comparison"]["rows"])
    checks = {c["check"]: c["result"] for c in report["node_health"]["report"]["checks"]}
    assert checks["gpu_count"] == "pass" and checks["ecc"] == "pass" and checks["pcie_link"] == "pass"
    # The row remaps from the same XML report the probe captured.
    assert checks["row_remap"] == "pass"
    # No journalctl or dmesg on this PATH: the kernel log is unknown, not clean.
    assert checks["xid"] == "unknown"


def test_a_different_memory_total_is_flagged(machine):
    machine["smi"](gpus=[GPUS[0], dict(GPUS[1], **{"memory.total": "40960"})])
    rc, report, _err = probe(machine)
    assert rc == 0
    assert report["comparison"]["status"] == "differs"
    (row,) = [r for r in report["comparison"]["rows"] if r["equal"] != "yes"]
    assert row == {"gpu": 1, "field": "memory.total", "parser": "81559", "nvidia_smi": "40960", "equal": "no"}


@pytest.mark.parametrize("given", [True, False], ids=["--nvidia-smi", "PATH"])
def test_a_missing_nvidia_smi_exits_1_with_a_report_saying_why(machine, given):
    args = ["--nvidia-smi", str(machine["tmp"] / "no-such-nvidia-smi")] if given else []
    rc, report, err = probe(machine, *args)
    assert rc == 1
    assert "nvidia-smi could not be run" in err and "not found" in err
    assert report["capture"]["status"] == "failed" and "not found" in report["capture"]["reason"]
    assert report["gpu_facts"]["status"] == "skipped" and report["commands"] == []


def test_nvidia_smi_is_not_run_while_the_nvidia_module_is_not_loaded(machine):
    machine["smi"]()
    (machine["sys"] / "module" / "nvidia" / "version").unlink()
    (machine["sys"] / "module" / "nvidia").rmdir()
    rc, report, _err = probe(machine)
    assert rc == 1 and "not loaded" in report["capture"]["reason"]
    assert not machine["log"].exists()


def test_a_hanging_nvidia_smi_times_out_and_is_not_called_again(machine):
    machine["smi"](sleep=30)
    rc, report, _err = probe(machine, "--timeout", "1", timeout=25)
    assert rc == 1
    (xml_run,) = commands(report, ["-q", "-x"])
    assert xml_run["timed_out"] is True and xml_run["exit_status"] is None
    assert "did not finish" in report["capture"]["reason"]
    assert len(machine["log"].read_text().splitlines()) == 1


def test_garbage_instead_of_xml_is_a_parser_error_not_a_failure(machine):
    machine["smi"](xml="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    rc, report, _err = probe(machine, "--fixture-name", "captured_garbage")
    assert rc == 0
    assert report["gpu_facts"]["status"] == "unknown" and "did not return XML" in report["gpu_facts"]["error"]
    assert report["comparison"]["status"] == "unknown"
    assert "captured_garbage.xml" in report["fixtures"]["not_written"]


def test_docker_and_nccl_are_skipped_with_a_reason_when_absent(machine):
    machine["smi"]()
    rc, report, _err = probe(machine, "--docker-image", "nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert rc == 0
    assert report["optional_checks"]["docker"] == {"status": "skipped", "reason": "docker is not on PATH"}
    assert report["optional_checks"]["nccl"]["status"] == "skipped"
    assert "all_reduce_perf" in report["optional_checks"]["nccl"]["reason"]


DOCKER = """\
import sys
open({log!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["image", "inspect"]:
    sys.exit(0 if sys.argv[-1] == "present:1" else 1)
if sys.argv[1] == "run":
    print("GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)\\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: y)")
"""


@pytest.mark.parametrize("image, status", [("present:1", "ran"), ("absent:1", "skipped")])
def test_docker_runs_only_an_image_already_present_and_never_pulls(machine, image, status):
    machine["smi"]()
    log = machine["tmp"] / "docker.log"
    executable(machine["bin"] / "docker", DOCKER.format(log=str(log)))
    rc, report, _err = probe(machine, "--docker-image", image)
    assert rc == 0
    docker = report["optional_checks"]["docker"]
    assert docker["status"] == status
    calls = log.read_text().splitlines()
    assert not any(call.startswith("pull") for call in calls)
    if status == "ran":
        assert docker["gpus_listed"] == 2 and docker["same_count_as_parser"] == "yes"
        assert "--pull=never" in calls[-1].split()
    else:
        assert "not present locally" in docker["reason"] and len(calls) == 1


def test_nccl_runs_on_every_gpu_through_node_health(machine):
    machine["smi"]()
    args_log = machine["tmp"] / "nccl.log"
    nccl = executable(machine["tmp"] / "all_reduce_perf", f"""\
import sys
open({str(args_log)!r}, "w").write(" ".join(sys.argv[1:]))
print("# Avg bus bandwidth    : 123.45")
""")
    rc, report, _err = probe(machine, "--nccl-test", str(nccl))
    assert rc == 0
    assert args_log.read_text() == "-b 8M -e 128M -f 2 -g 2"
    result = report["optional_checks"]["nccl"]
    assert result["status"] == "ran" and result["busbw_gbps"] == "123.45"


def test_fixture_name_copies_the_capture_ready_for_the_fixtures_directory(machine):
    machine["smi"]()
    rc, report, _err = probe(machine, "--fixture-name", "captured_h100_r550")
    assert rc == 0
    dest = machine["tmp"] / "out" / "fixtures" / "nvidia_smi"
    assert (dest / "captured_h100_r550.xml").read_text() == XML.read_text()
    assert (dest / "captured_h100_r550.topo.txt").read_text() == TOPO
    assert report["fixtures"]["not_written"] == {}


@pytest.mark.parametrize("args", [[], ["--out", "x", "--fixture-name", "../escape"]], ids=["no --out", "bad name"])
def test_bad_usage_exits_2(tmp_path, args):
    proc = subprocess.run([sys.executable, str(PROBE), *args], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_the_probes_health_settings_are_the_roles_defaults():
    """The probe runs node_health's checks with the role's defaults; it
    carries a copy, as a bare machine cannot read the role's YAML."""
    spec = importlib.util.spec_from_file_location("gpu_probe_settings", PROBE)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    # The settings' keys are the health script's; the options' names may have
    # been renamed since (node_health_pcie_enabled), and a renamed option's
    # default reads its old name, so the shipped value is argument_specs'.
    options = yaml.safe_load((ROOT / "roles/node_health/meta/argument_specs.yml").read_text())
    options = options["argument_specs"]["main"]["options"]
    shipped = {}
    for key in probe.HEALTH_DEFAULTS:
        option = OPTIONS_RENAMED.get("node_health_" + key, "node_health_" + key)
        shipped[key] = options[option]["default"]
    assert probe.HEALTH_DEFAULTS == shipped
