"""The inventory benchmark: ``make bench-inventory`` (python -m bench.inventory).

Side by side with amazon.aws.aws_ec2, on the same recorded moto data, from
one run of this script:

- latency-bound: 16 regions, 1,600 instances, 150 ms added to every call;
- volume-bound: 10,000 instances in 16 regions;
- cache hit: the volume dataset again, served from each plugin's cache;
- four clouds at once: 10,000 instances, 2,500 on each emulated cloud
  (gpufleet.cloud only; amazon.aws.aws_ec2 covers AWS alone).

Each figure is one ``ansible-inventory --list`` process, measured from the
outside with wait4: wall time and CPU time (user + system); the process
reports its peak RSS (VmHWM) and how long the inventory parse itself took, which
separates Python and Ansible start-up from the plugin's own work. The
emulators run in this process, not the measured one, and AWS answers come
from a recording (see replay.py), so no figure includes moto's CPU.

Figures go to bench/inventory/results.md and results.json. Nothing here
is asserted: a slow machine gives slow figures, not a failure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.inventory.replay import Recorder, Replay
from tests.emulators import fleet
from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "bench" / "inventory"
HERE = Path(__file__).resolve().parent
LATENCY = 0.150
REGIONS = [
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-southeast-1", "ap-southeast-2",
    "ap-northeast-1", "ap-northeast-2",
]
AWS_TYPES = ["m5.large", "g4dn.xlarge", "g5.2xlarge", "g6e.xlarge", "p3dn.24xlarge", "p4d.24xlarge", "p5.48xlarge"]
# Instances per reservation: real fleets launch in small batches; moto
# pages DescribeInstances by reservation.
RESERVATION = 25
OTHER_CLOUDS = {
    "aliyun": (AliyunEmulator, ["cn-hangzhou", "cn-beijing", "cn-shanghai", "cn-shenzhen"]),
    "tencent": (TencentEmulator, ["ap-guangzhou", "ap-shanghai", "ap-beijing", "ap-chengdu"]),
    "huawei": (HuaweiEmulator, ["cn-north-4", "cn-east-3", "cn-south-1", "ap-southeast-1"]),
}
PLUGIN_FILES = {"aliyun": "aliyun_ecs.yml", "tencent": "tencent_cvm.yml", "huawei": "huawei_ecs.yml", "aws": "aws_ec2.yml"}


def aws_fleet(regions, count, seed):
    """``count`` instances over ``regions`` in reservations of RESERVATION
    identical instances: a GPU-heavy mix, every fifth reservation spot,
    every twentieth stopped."""
    rng = random.Random(seed)
    instances = []
    per_region = count // len(regions)
    for region in regions:
        for block, start in enumerate(range(0, per_region, RESERVATION)):
            spec = {"region": region, "instance_type": rng.choice(AWS_TYPES),
                    "charge": "spot" if block % 5 == 0 else "on_demand",
                    "state": "stopped" if block % 20 == 19 else "running",
                    "tags": {"team": rng.choice(fleet.TEAMS), "env": rng.choice(fleet.ENVIRONMENTS)}}
            # The emulator copies each spec as it seeds, so one dict serves a reservation.
            instances.extend([spec] * min(RESERVATION, per_region - start))
    return instances


def environment():
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "AWS_ACCESS_KEY_ID": "AKIA-bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_EC2_METADATA_DISABLED": "true",
        "ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI-bench", "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "bench-secret",
        "ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true",
        "TENCENTCLOUD_SECRET_ID": "AKID-bench", "TENCENTCLOUD_SECRET_KEY": "bench-secret",
        "HUAWEICLOUD_SDK_AK": "HW-bench", "HUAWEICLOUD_SDK_SK": "bench-secret",
    })
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "ANSIBLE_INVENTORY_CACHE"):
        env.pop(name, None)
    return env


def write_config(folder, name, config):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(config))
    return path


def aws_configs(folder, url, regions, cache_dir=None, recording=False):
    """The same inventory for both plugins: every instance, named by id.
    ``recording``: against moto itself, which renders each page from its
    whole model, one request at a time; with 16 regions asking at once a
    page of the 10,000-instance dataset waited past our plugin's 30 s
    timeout, and the region failed as it should. That run is not measured,
    so it waits longer."""
    ours = {"plugin": "gpufleet.cloud.aws_ec2", "regions": regions, "endpoint": url, "hostnames": ["instance_id"],
            "gpu_only": False, "strict_regions": True}
    if recording:
        ours["timeout"] = 900
    theirs = {"plugin": "amazon.aws.aws_ec2", "regions": regions, "endpoint_url": url, "hostnames": ["instance-id"]}
    configs = {"amazon.aws.aws_ec2": theirs, "gpufleet.cloud.aws_ec2": ours}
    if cache_dir:
        for name, config in configs.items():
            config.update(cache=True, cache_plugin="ansible.builtin.jsonfile", cache_timeout=3600,
                          cache_connection=str(cache_dir / name))
    return {name: write_config(folder / name, "bench.aws_ec2.yml", config) for name, config in configs.items()}


def measure(source, env):
    """One ansible-inventory --list of ``source``, measured from outside."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        errors = Path(tmp) / "stderr"
        with open(errors, "w") as stderr:
            start = time.monotonic()
            process = subprocess.Popen([sys.executable, "-m", "bench.inventory.measure", str(source), str(report)],
                                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
            _pid, status, usage = os.wait4(process.pid, 0)
            wall = time.monotonic() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        inner = json.loads(report.read_text()) if report.exists() else {}
        if process.returncode or inner.get("rc"):
            raise RuntimeError("inventory run of %s failed:\n%s" % (source, errors.read_text()[-3000:]))
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": inner["peak_kib"] / 1024.0,
            "parse_wall": inner["parse_wall"], "parse_cpu": inner["parse_cpu"], "hosts": inner["hosts"]}


def recording(name, regions, count, env):
    """The recorded moto answers of a dataset, recorded now if missing."""
    path = CACHE / ("%s.json.gz" % name)
    meta = {"format": 1, "regions": regions, "count": count, "reservation": RESERVATION, "types": AWS_TYPES,
            # The calls the plugins make come from these files: when they
            # change, the recording is made again.
            "sources": _digest(ROOT / "plugins" / "module_utils" / "_discovery_aws.py",
                               ROOT / "plugins" / "module_utils" / "_discovery.py",
                               ROOT / ".collections" / "ansible_collections" / "amazon" / "aws" / "MANIFEST.json")}
    if path.exists():
        try:
            if Replay(path).meta == meta:
                return path
        except (OSError, ValueError, KeyError):
            pass
    print("recording %s: seeding %d instances into moto (once; kept in %s)" % (name, count, path), flush=True)
    recorder = Recorder(regions=regions).start()
    try:
        recorder.seed(aws_fleet(regions, count, seed=count), reservation_size=RESERVATION)
        with tempfile.TemporaryDirectory() as tmp:
            for plugin, config in aws_configs(Path(tmp), recorder.url, regions, recording=True).items():
                print("recording %s: %s lists it through moto" % (name, plugin), flush=True)
                result = measure(config, env)
                if result["hosts"] != count:
                    raise RuntimeError("%s listed %s hosts of %d" % (plugin, result["hosts"], count))
        recorder.save(path, meta)
    finally:
        recorder.stop()
    return path


def side_by_side(case, dataset, latency, env, cache=False):
    rows = []
    replay = Replay(dataset).start()
    replay.faults.latency = latency
    try:
        with tempfile.TemporaryDirectory() as tmp:
            configs = aws_configs(Path(tmp), replay.url, replay.meta["regions"],
                                  cache_dir=Path(tmp) / "cache" if cache else None)
            for plugin, config in configs.items():
                if cache:
                    measure(config, env)  # fills the cache; not a figure
                calls = len(replay.calls)
                row = measure(config, env)
                row.update(case=case, plugin=plugin, api_calls=len(replay.calls) - calls)
                rows.append(row)
                print(format_row(row), flush=True)
    finally:
        replay.stop()
    return rows


def four_clouds(dataset, env):
    emulators = []
    replay = Replay(dataset).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "multicloud"
            for cloud, (emulator_class, regions) in OTHER_CLOUDS.items():
                emulator = emulator_class(regions=regions).start()
                emulators.append(emulator)
                emulator.seed(fleet.generate(emulator.CATALOG, regions, replay.meta["count"], seed=7, prefix=cloud))
                config = {"plugin": "gpufleet.cloud." + PLUGIN_FILES[cloud][:-4], "regions": regions,
                          "endpoint": emulator.url, "hostnames": ["instance_id"], "gpu_only": False,
                          "strict_regions": True}
                if cloud == "huawei":
                    config["iam_endpoint"] = emulator.url
                write_config(folder, PLUGIN_FILES[cloud], config)
            write_config(folder, PLUGIN_FILES["aws"], {
                "plugin": "gpufleet.cloud.aws_ec2", "regions": replay.meta["regions"], "endpoint": replay.url,
                "hostnames": ["instance_id"], "gpu_only": False, "strict_regions": True})
            row = measure(folder, env)
    finally:
        replay.stop()
        for emulator in emulators:
            emulator.stop()
    row.update(case="four clouds, %s" % format(4 * replay.meta["count"], ","), plugin="gpufleet.cloud (all four)",
               api_calls=None)
    print(format_row(row), flush=True)
    return [row]


def format_row(row):
    return ("%-34s %-24s hosts %6d  wall %7.2f s  cpu %7.2f s  peak %7.1f MiB  parse %6.2f s wall %6.2f s cpu"
            % (row["case"], row["plugin"], row["hosts"], row["wall"], row["cpu"], row["rss_mib"],
               row["parse_wall"], row["parse_cpu"]))


def report(rows, started):
    by = {(r["case"], r["plugin"]): r for r in rows}

    def ratio(case, key):
        theirs, ours = by.get((case, "amazon.aws.aws_ec2")), by.get((case, "gpufleet.cloud.aws_ec2"))
        return theirs[key] / ours[key] if theirs and ours and ours[key] else None

    lines = [
        "# Inventory benchmark",
        "",
        "`make bench-inventory` (python -m bench.inventory), %s, one run." % started,
        "Machine: %d CPUs, Python %s, ansible-core %s; amazon.aws %s." % (
            os.cpu_count(), platform.python_version(), _version("ansible-core"), _amazon_version()),
        "",
        "Each row is one `ansible-inventory --list` process: wall and user+system CPU measured from outside,",
        "peak RSS (VmHWM) from inside; *parse* is the inventory parse alone, without Python and Ansible start-up.",
        "AWS answers are moto's, recorded once and replayed (see bench/inventory/replay.py).",
        "",
        "| case | plugin | hosts | API calls | wall s | CPU s | peak MiB | parse wall s | parse CPU s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %.2f | %.2f | %.0f | %.2f | %.2f |" % (
            r["case"], r["plugin"], r["hosts"], "-" if r["api_calls"] is None else r["api_calls"], r["wall"],
            r["cpu"], r["rss_mib"], r["parse_wall"], r["parse_cpu"]))
    lines += ["", "## amazon.aws.aws_ec2 / gpufleet.cloud.aws_ec2", ""]
    for case in dict.fromkeys(r["case"] for r in rows):
        parts = ["%s %.1fx" % (label, value) for label, value in (
            ("wall", ratio(case, "wall")), ("parse wall", ratio(case, "parse_wall")), ("CPU", ratio(case, "cpu")),
            ("peak memory", ratio(case, "rss_mib"))) if value]
        if parts:
            lines.append("- %s: %s" % (case, ", ".join(parts)))
    text = "\n".join(lines) + "\n"
    (HERE / "results.md").write_text(text)
    (HERE / "results.json").write_text(json.dumps({"started": started, "rows": rows}, indent=2) + "\n")
    print("\n" + text)


def _digest(*paths):
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _version(package):
    from importlib.metadata import version
    return version(package)


def _amazon_version():
    manifest = ROOT / ".collections" / "ansible_collections" / "amazon" / "aws" / "MANIFEST.json"
    return json.loads(manifest.read_text())["collection_info"]["version"]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.inventory", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cases", default="latency,volume,cache,four-clouds",
                        help="comma-separated subset of latency,volume,cache,four-clouds")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply every instance count (a quick smoke run: 0.05)")
    args = parser.parse_args(argv)
    small, large, quarter = (max(len(REGIONS) * RESERVATION, int(n * args.scale)) for n in (1600, 10000, 2500))
    cases = set(args.cases.split(","))
    env = environment()
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    rows = []
    if "latency" in cases:
        rows += side_by_side("latency: 16 regions, %s, 150 ms" % format(small, ","),
                             recording("latency", REGIONS, small, env), LATENCY, env)
    if cases & {"volume", "cache"}:
        volume = recording("volume", REGIONS, large, env)
        if "volume" in cases:
            rows += side_by_side("volume: 16 regions, %s" % format(large, ","), volume, 0.0, env)
        if "cache" in cases:
            rows += side_by_side("cache hit: %s" % format(large, ","), volume, 0.0, env, cache=True)
    if "four-clouds" in cases:
        rows += four_clouds(recording("four-clouds-aws", REGIONS[:4], quarter, env), env)
    report(rows, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
