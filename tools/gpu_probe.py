# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Read-only probe of a GPU machine lent for a few minutes: capture what
nvidia-smi says, run this collection's own nvidia-smi parser (gpu_facts) and
GPU checks (node_health) on it, and write one JSON report.

Usage:
    tools/gpu-probe --out DIR [--nvidia-smi PATH] [--timeout SECONDS]
                    [--total-timeout SECONDS] [--expected-gpus N]
                    [--fixture-name NAME] [--docker-image IMAGE] [--nccl-test PATH]

Writes into DIR (and nowhere else):
    nvidia-smi-q-x.xml        nvidia-smi -q -x
    nvidia-smi-topo-m.txt     nvidia-smi topo -m
    nvidia-smi-nvlink-s.txt   nvidia-smi nvlink -s (when the XML lists GPUs)
    nvidia-smi-query-gpu.csv  nvidia-smi --query-gpu=index,name,uuid,memory.total,
                              driver_version,pci.bus_id --format=csv,noheader,nounits
    health-NN-PROGRAM.txt     each command node_health's checks ran
    *.stderr                  a command's standard error, where it wrote any
    report.json               host facts; every command (argv, exit status,
                              seconds, timed out, output file); the parser's
                              result; node_health's checks; the parser against
                              --query-gpu, field by field; the optional checks
    fixtures/nvidia_smi/NAME.xml, NAME.topo.txt, NAME.nvlink.txt
                              with --fixture-name NAME: ready to copy into
                              tests/unit/plugins/fixtures/nvidia_smi/. Name it
                              captured_<gpu>_<driver> (e.g. captured_h200_r570):
                              the parser's unit tests run over captured_*.xml.

It only reads. nvidia-smi runs in the query forms above and nothing else
(never -pm, -r, -c, -mig, -e, -pl, ...); it does not run at all when the
nvidia kernel module is not loaded, because NVML would then load it through
nvidia-modprobe. Nothing is installed or pulled: the Docker check runs only
when docker is on PATH and --docker-image names an image already present
(docker run --pull=never), the NCCL check only when all_reduce_perf is on
PATH or given with --nccl-test. Every command has a time-out (--timeout,
default 60 s) and the whole probe a budget (--total-timeout, default 180 s);
a time-out is recorded, not fatal, and an nvidia-smi that hung once is not
called again. Values that could not be read are "unknown", never ok or 0.

Exit status: 0 when nvidia-smi -q -x ran to the end (read report.json: the
checks may still have found problems, and a non-XML answer is recorded as
the parser's error); 1 when nvidia-smi could not be run (not found, the
nvidia module not loaded, or -q -x timed out), with report.json saying why;
2 on bad usage.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

# Loading the collection's modules by path must not leave __pycache__ in
# the checkout: the probe writes into its output directory only.
sys.dont_write_bytecode = True

VERSION = "1"
ROOT = Path(__file__).resolve().parent.parent
MODULE_UTILS = ROOT / "plugins" / "module_utils"
HEALTH_SCRIPT = ROOT / "roles" / "node_health" / "files" / "gpufleet-health.py"

XML = "nvidia-smi-q-x.xml"
TOPO = "nvidia-smi-topo-m.txt"
NVLINK = "nvidia-smi-nvlink-s.txt"
QUERY_CSV = "nvidia-smi-query-gpu.csv"
# --query-gpu field -> key of the parser's GPU entry (None: the driver
# version, which the parser keeps once for all GPUs).
COMPARED = (
    ("index", "index"),
    ("name", "name"),
    ("uuid", "uuid"),
    ("memory.total", "memory_total_mib"),
    ("driver_version", None),
    ("pci.bus_id", "pci_bus_id"),
)
NUMERIC = ("index", "memory.total")
CSV_FORMAT = "--format=csv,noheader,nounits"
# The only nvidia-smi argument lists the probe lets through; the
# --query-gpu form is checked apart (any fields, CSV output).
READ_ONLY_SMI = (("-q", "-x"), ("topo", "-m"), ("nvlink", "-s"))
NCCL_ARGS = ["-b", "8M", "-e", "128M", "-f", "2"]
# node_health's defaults for its checks, by the health script's setting
# (the role's option node_health_<key>, or the name it was renamed to; a
# unit test keeps them equal to roles/node_health/meta/argument_specs.yml).
# A bare machine has no YAML parser to read them from there.
HEALTH_DEFAULTS = {
    "driver_version": "",
    "persistence_mode": True,
    "ecc_required": True,
    "ecc_max_uncorrected": 0,
    "pcie": True,
    "xid_window_minutes": 60,
    "xid_ignore": [13, 31, 43, 45],
}
FIXTURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# How long a process gets to go after SIGKILL before it is left behind: one
# stuck in the driver (state D) never goes, and must not hang the probe.
REAP_SECONDS = 5


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def smi_read_only(args: list[str]) -> bool:
    if tuple(args) in READ_ONLY_SMI:
        return True
    return len(args) == 2 and args[0].startswith("--query-gpu=") and args[1] == CSV_FORMAT


def shown(value) -> str:
    """A value for the report: "unknown" where there is none to show."""
    if value is None:
        return "unknown"
    text = str(value).strip()
    # nvidia-smi's CSV writes "[N/A]", "[Not Supported]" and so on.
    if not text or text.startswith("[") or text == "N/A":
        return "unknown"
    return text


class Runner:
    """Runs each command with a time-out, its output into the output
    directory, and keeps a record of it for the report."""

    def __init__(self, out: Path, timeout: float, total: float, nvidia_smi: str | None):
        self.out = out
        self.timeout = timeout
        self.deadline = time.monotonic() + total
        self.nvidia_smi = nvidia_smi
        self.smi_hung = False
        self.records: list[dict] = []
        self._health_calls = 0

    def _is_smi(self, program: str) -> bool:
        return program == self.nvidia_smi or Path(program).name == "nvidia-smi"

    def __call__(self, argv: list[str], output: str, timeout: float | None = None) -> dict:
        if self._is_smi(argv[0]) and not smi_read_only(argv[1:]):
            # A programming error, not a finding: fail loudly before running it.
            raise ValueError(f"refusing to run nvidia-smi {' '.join(argv[1:])}: not a read-only query")
        record = {"argv": argv, "exit_status": None, "duration_s": 0.0, "timed_out": False,
                  "output": None, "stderr": None, "skipped": None, "error": None}
        remaining = self.deadline - time.monotonic()
        if self._is_smi(argv[0]) and self.smi_hung:
            record["skipped"] = "nvidia-smi timed out before: it would hang again"
        elif remaining < 1:
            record["skipped"] = "the probe's time budget (--total-timeout) is spent"
        else:
            self._run(record, output, min(timeout or self.timeout, self.timeout, remaining))
        self.records.append(record)
        return record

    def _run(self, record: dict, output: str, limit: float) -> None:
        argv = record["argv"]
        out_path, err_path = self.out / output, self.out / (output + ".stderr")
        start = time.monotonic()
        with out_path.open("wb") as out_fh, err_path.open("wb") as err_fh:
            try:
                # A session of its own, so a time-out kills its children too.
                proc = subprocess.Popen(  # pylint: disable=consider-using-with
                    argv, stdin=subprocess.DEVNULL, stdout=out_fh, stderr=err_fh, start_new_session=True
                )
            except OSError as exc:
                proc = None
                record["error"] = f"{argv[0]} not found" if isinstance(exc, FileNotFoundError) \
                    else f"{argv[0]} could not be started: {exc.strerror}"
        if proc is None:
            out_path.unlink()
            err_path.unlink()
            return
        try:
            record["exit_status"] = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            record["timed_out"] = True
            record["error"] = f"{argv[0]} did not finish within {limit:.0f}s"
            self.smi_hung = self.smi_hung or self._is_smi(argv[0])
            try:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=REAP_SECONDS)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                record["error"] += "; still there after SIGKILL (stuck in the kernel?), left behind"
        record["duration_s"] = round(time.monotonic() - start, 3)
        record["output"] = output
        if err_path.stat().st_size:
            record["stderr"] = err_path.name
        else:
            err_path.unlink()

    def text(self, record: dict, stderr: bool = False) -> str:
        names = [record["output"]] + ([record["stderr"]] if stderr else [])
        return "".join((self.out / name).read_text(errors="replace") for name in names if name)

    def for_health(self, argv: list[str], timeout: float) -> tuple[int | None, str]:
        """node_health's run(): the same answers, from a recorded run
        under the probe's time-out and budget."""
        self._health_calls += 1
        record = self(argv, f"health-{self._health_calls:02d}-{Path(argv[0]).name}.txt", timeout)
        if record["skipped"]:
            return None, f"{argv[0]} did not run: {record['skipped']}"
        if record["error"]:
            return None, record["error"]
        return record["exit_status"], self.text(record, stderr=True)


def load_by_path(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_parser():
    """gpu_facts' parser. Its module needs the standard library and the
    node-side library's program runner only, so both load by path, under
    their names on a node, without Ansible's collection loader."""
    load_by_path("gpufleet_process", MODULE_UTILS / "_process.py")
    return load_by_path("gpufleet_nvidia_smi", MODULE_UTILS / "_nvidia_smi.py")


def load_health():
    """node_health's script. On a node the node-side library is installed
    next to it; in the checkout it is plugins/module_utils."""
    load_parser()
    load_by_path("gpufleet_textfile", MODULE_UTILS / "textfile.py")
    load_by_path("gpufleet_gpu_faults", MODULE_UTILS / "_gpu_faults.py")
    return load_by_path("gpufleet_health", HEALTH_SCRIPT)


def guarded(section, *args) -> dict:
    """One section's result; a bug in it costs that section, not the report."""
    try:
        return section(*args)
    except Exception as exc:  # pylint: disable=broad-exception-caught  # noqa: BLE001
        return {"status": "unknown", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}


def os_pretty_name() -> str:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("PRETTY_NAME="):
                return shown(line.split("=", 1)[1].strip().strip("\"'"))
    return "unknown"


def host_facts(sysfs: Path) -> dict:
    module = sysfs / "module" / "nvidia"
    try:
        version = (module / "version").read_text().strip() or "unknown"
    except OSError:
        version = "unknown" if module.is_dir() else None
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release() or "unknown",
        "os": os_pretty_name(),
        "python": platform.python_version(),
        "time_utc": utc_now(),
        "nvidia_module_loaded": module.is_dir(),
        "nvidia_module_version": version,
    }


def parse_xml(runner: Runner, record: dict) -> dict:
    nvsmi = load_parser()
    try:
        facts = nvsmi.parse_query_xml(runner.text(record))
    except nvsmi.NvidiaSmiParseError as exc:
        return {"status": "unknown", "error": str(exc), "nvidia_smi_exit_status": record["exit_status"]}
    return {"status": "ok", "facts": facts}


def add_nvlinks(runner: Runner, parsed: dict, smi: str) -> None:
    """gpu_facts' second call: NVLink states, only where there are GPUs."""
    if parsed.get("status") != "ok" or not parsed["facts"]["count"]:
        return
    record = runner([smi, "nvlink", "-s"], NVLINK)
    # Some branches exit non-zero on GPUs without NVLink: "no links", as in gpu_facts.
    if record["exit_status"] == 0:
        nvsmi = load_parser()
        nvsmi.merge_nvlinks(parsed["facts"], nvsmi.parse_nvlink_status(runner.text(record)))


def equal(field: str, ours: str, theirs: str) -> str:
    if "unknown" in (ours, theirs):
        return "unknown" if ours == theirs else "no"
    if field in NUMERIC:
        try:
            return "yes" if float(ours) == float(theirs) else "no"
        except ValueError:
            return "no"
    return "yes" if ours == theirs else "no"


def compare(runner: Runner, parsed: dict, record: dict) -> dict:
    """The parser's GPUs against nvidia-smi's own --query-gpu answer, field by field."""
    if parsed.get("status") != "ok":
        return {"status": "unknown", "reason": "the parser gave no result", "rows": []}
    if record["exit_status"] != 0:
        why = record["skipped"] or record["error"] or f"exit {record['exit_status']}"
        return {"status": "unknown", "reason": f"--query-gpu gave no answer: {why}", "rows": []}
    fields = [field for field, _key in COMPARED]
    answer = {}
    for row in csv.reader(runner.text(record).splitlines()):
        if row:
            cells = dict(zip(fields, (cell.strip() for cell in row)))
            answer[cells.get("index")] = cells
    facts = parsed["facts"]
    rows = []
    for gpu in facts["gpus"]:
        cells = answer.pop(str(gpu["index"]), None)
        for field, key in COMPARED:
            ours = shown(facts["driver_version"] if key is None else gpu[key])
            theirs = shown(cells.get(field)) if cells else "absent"
            rows.append({"gpu": gpu["index"], "field": field, "parser": ours, "nvidia_smi": theirs,
                         "equal": equal(field, ours, theirs)})
    for index in answer:
        rows.append({"gpu": index, "field": "gpu", "parser": "absent", "nvidia_smi": "present", "equal": "no"})
    outcomes = {row["equal"] for row in rows}
    status = "differs" if "no" in outcomes else ("unknown" if "unknown" in outcomes or not rows else "equal")
    return {"status": status, "rows": rows}


def health_checks(runner: Runner, smi: str, expected, nccl: str | None) -> dict:
    """node_health's own checks against this nvidia-smi, with the role's
    defaults (roles/node_health/defaults/main.yml) but for the expected GPU
    count, which the probe knows only from --expected-gpus."""
    health = load_health()
    # Every command the checks run goes through the probe: recorded, saved,
    # under its time-out, and never to an nvidia-smi that hung.
    health.run = runner.for_health
    cfg = {
        "expected_gpu_count": expected,
        **HEALTH_DEFAULTS,
        "nccl": {"enabled": bool(nccl), "on_timer": False, "binary": nccl or "", "args": NCCL_ARGS,
                 "min_busbw_gbps": 0.0, "timeout_seconds": runner.timeout},
        "nvidia_smi": smi,
    }
    return {"status": "ok", "report": health.run_checks(cfg, nccl=bool(nccl))}


def nccl_check(nccl: str | None, why_not: str, health: dict) -> dict:
    if not nccl:
        return {"status": "skipped", "reason": why_not}
    if health.get("status") != "ok":
        return {"status": "unknown", "binary": nccl, "reason": "node_health's checks did not run"}
    check = next(c for c in health["report"]["checks"] if c["check"] == "nccl_busbw")
    return {"status": "ran", "binary": nccl, "check": check,
            "busbw_gbps": shown(health["report"]["nccl_busbw_gbps"])}


def docker_check(runner: Runner, image: str | None, parsed: dict) -> dict:
    docker = shutil.which("docker")
    if not docker:
        return {"status": "skipped", "reason": "docker is not on PATH"}
    if not image:
        return {"status": "skipped", "reason": "no --docker-image given (the probe never pulls one)"}
    inspect = runner([docker, "image", "inspect", "--format", "{{.Id}}", image], "docker-image-inspect.txt")
    if inspect["exit_status"] != 0:
        why = inspect["skipped"] or inspect["error"] or f"docker image inspect exit {inspect['exit_status']}"
        return {"status": "skipped", "reason": f"image {image} is not present locally ({why}); the probe never pulls"}
    record = runner([docker, "run", "--rm", "--pull=never", "--network=none", "--gpus", "all", image,
                     "nvidia-smi", "-L"], "docker-run-nvidia-smi-L.txt")
    listed = sum(line.startswith("GPU ") for line in runner.text(record).splitlines())
    expected = parsed["facts"]["count"] if parsed.get("status") == "ok" else None
    same = "unknown" if record["exit_status"] != 0 or expected is None else ("yes" if listed == expected else "no")
    return {"status": "ran", "image": image, "exit_status": record["exit_status"], "timed_out": record["timed_out"],
            "gpus_listed": listed if record["exit_status"] == 0 else "unknown", "same_count_as_parser": same}


def write_fixtures(runner: Runner, name: str, parsed: dict) -> dict:
    """Copies ready for tests/unit/plugins/fixtures/nvidia_smi/: only what
    completed, and the XML only when the parser reads it."""
    dest = runner.out / "fixtures" / "nvidia_smi"
    written, not_written = [], {}
    for suffix, source in ((".xml", XML), (".topo.txt", TOPO), (".nvlink.txt", NVLINK)):
        record = next((r for r in runner.records if r["output"] == source), None)
        if record is None or record["exit_status"] != 0:
            not_written[name + suffix] = "its command did not run to a clean exit"
        elif suffix == ".xml" and parsed.get("status") != "ok":
            not_written[name + suffix] = "the parser cannot read it: " + parsed.get("error", "")
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(runner.out / source, dest / (name + suffix))
            written.append(str(Path("fixtures", "nvidia_smi", name + suffix)))
    return {"written": written, "not_written": not_written}


def capture(args, runner: Runner, report: dict, smi: str) -> None:
    xml = runner([smi, "-q", "-x"], XML)
    if xml["exit_status"] is None:
        report["capture"] = {"status": "failed", "reason": xml["error"] or xml["skipped"]}
        return
    report["capture"] = {"status": "ok"}
    runner([smi, "topo", "-m"], TOPO)
    parsed = report["gpu_facts"] = guarded(parse_xml, runner, xml)
    guarded(add_nvlinks, runner, parsed, smi)
    fields = ",".join(field for field, _key in COMPARED)
    query = runner([smi, "--query-gpu=" + fields, CSV_FORMAT], QUERY_CSV)
    report["comparison"] = guarded(compare, runner, parsed, query)
    nccl = args.nccl_test or shutil.which("all_reduce_perf")
    health = report["node_health"] = guarded(health_checks, runner, smi, args.expected_gpus, nccl)
    report["optional_checks"] = {
        "docker": guarded(docker_check, runner, args.docker_image, parsed),
        "nccl": guarded(nccl_check, nccl, "all_reduce_perf is not on PATH and --nccl-test was not given", health),
    }
    if args.fixture_name:
        report["fixtures"] = guarded(write_fixtures, runner, args.fixture_name, parsed)


def resolve_smi(name: str, sysfs: Path) -> tuple[str | None, str]:
    """(path, "") or (None, why nvidia-smi must not or cannot run)."""
    path = shutil.which(name)
    if not path:
        return None, f"{name}: not found or not executable (give --nvidia-smi PATH)"
    if not (sysfs / "module" / "nvidia").is_dir():
        return None, (f"the nvidia kernel module is not loaded ({sysfs}/module/nvidia is absent): running {path} "
                      "could load it through nvidia-modprobe, and the probe changes no driver state")
    return path, ""


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="gpu-probe", description=__doc__.split("\n\n", 1)[0],
        epilog="Details: the docstring at the top of tools/gpu_probe.py.",
    )
    parser.add_argument("--out", required=True, type=Path, help="directory to write into (created if missing)")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi to query (default: the one on PATH)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds each command may take (default 60)")
    parser.add_argument("--total-timeout", type=float, default=180.0,
                        help="seconds all commands together may take (default 180)")
    parser.add_argument("--expected-gpus", type=float, default=None,
                        help="GPUs the machine should have, for node_health's gpu_count check (default: unknown)")
    parser.add_argument("--fixture-name", help="also copy the capture to DIR/fixtures/nvidia_smi/NAME.* "
                        "(name it captured_<gpu>_<driver> for the parser's tests)")
    parser.add_argument("--docker-image",
                        help="an image already present locally, for docker run --gpus all IMAGE nvidia-smi -L")
    parser.add_argument("--nccl-test", help="all_reduce_perf to run (default: the one on PATH, if any)")
    parser.add_argument("--sysfs", type=Path, default=Path("/sys"),
                        help="where to look for module/nvidia (default /sys; for tests)")
    args = parser.parse_args(argv)
    if args.fixture_name is not None and not FIXTURE_NAME.match(args.fixture_name):
        parser.error("--fixture-name: letters, digits, _ and - only (the suffixes are added)")
    if args.timeout <= 0 or args.total_timeout <= 0:
        parser.error("--timeout and --total-timeout must be positive")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: not a directory")
    return args


def summary(report: dict) -> str:
    lines = [f"gpu-probe: capture {report['capture']['status']}"]
    parsed = report.get("gpu_facts", {})
    if parsed.get("status") == "ok":
        names = sorted({shown(gpu["name"]) for gpu in parsed["facts"]["gpus"]})
        lines.append(f"  parser: {parsed['facts']['count']} GPU(s) {', '.join(names)}")
    elif parsed:
        lines.append(f"  parser: unknown ({parsed.get('error')})")
    if "comparison" in report:
        lines.append(f"  parser against --query-gpu: {report['comparison']['status']}")
    health = report.get("node_health", {})
    if health.get("status") == "ok":
        checks = ", ".join(f"{c['check']} {c['result']}" for c in health["report"]["checks"])
        lines.append(f"  node_health: {health['report']['status']} ({checks})")
    for name, check in report.get("optional_checks", {}).items():
        lines.append(f"  {name}: {check['status']}" + (f" ({check['reason']})" if check.get("reason") else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"gpu-probe: cannot create {args.out}: {exc.strerror}", file=sys.stderr)
        return 2
    smi, why = resolve_smi(args.nvidia_smi, args.sysfs)
    runner = Runner(args.out, args.timeout, args.total_timeout, smi)
    report = {
        "probe": {"version": VERSION, "argv": sys.argv, "started_utc": utc_now()},
        "host": host_facts(args.sysfs),
        "nvidia_smi": smi or args.nvidia_smi,
        "capture": {"status": "failed", "reason": why},
        "commands": runner.records,
    }
    if smi:
        capture(args, runner, report, smi)
    for section in ("gpu_facts", "comparison", "node_health"):
        report.setdefault(section, {"status": "skipped", "reason": "nvidia-smi could not be run"})
    report["probe"]["finished_utc"] = utc_now()
    (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if report["capture"]["status"] != "ok":
        print(f"gpu-probe: nvidia-smi could not be run: {report['capture']['reason']}\n"
              f"gpu-probe: report in {args.out / 'report.json'}", file=sys.stderr)
        return 1
    print(summary(report) + f"\ngpu-probe: report in {args.out / 'report.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
