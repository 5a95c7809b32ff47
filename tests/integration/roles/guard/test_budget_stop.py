"""A spend cap stops the instance through the cloud's API, exactly once
(issue 18): the guard on a node, converged with the final action ``stop``,
finds the node's spend past its cap and calls Alibaba Cloud's StopInstance
with StoppedMode StopCharging, through the official SDK the role installs
on the node, against the ECS emulator (gpufleet/lab/_cloud/aliyun.py) on
this machine. The first stop call is throttled, as ECS throttles: the guard
tries again after its backoff. A restarted daemon does not stop again.

The role's other paths (the spot notice, idle GPUs, the checkpoint hook)
are the Molecule scenario's and the end-to-end test's; each cloud's stop
call and its fault matrix are unit-tested against each cloud's emulator
(tests/unit/roles/guard/files/test_gpufleet_guard_stop.py)."""

from __future__ import annotations

import json

import pytest

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.integration.storage_nodes import HOST_LOOPBACK, apply_role, node, sh
from tests.waiting import wait_for

pytestmark = pytest.mark.lab

REGION = "cn-hangzhou"
GUARD_STATE = "/var/lib/gpufleet/guard/state.json"
GUARD_METRICS = "/var/lib/prometheus/node-exporter/gpufleet_guard.prom"
SECRET = "gpufleet-lab-stop-secret-7f3a"


def guard_vars(emulator, instance_id: str) -> dict:
    return {
        "guard_cloud": "aliyun",
        "guard_spot": False,
        "guard_idle": False,
        "guard_poll_seconds": 1,
        # 3,600 an hour is 1 a second: a cap of 1 is reached at once.
        "guard_price_per_hour": 3600,
        "guard_node_cap": 1,
        "guard_checkpoint_seconds": 30,
        "guard_final_action": "stop",
        "guard_stop_instance_id": instance_id,
        "guard_stop_region": REGION,
        "guard_stop_endpoint": f"http://{HOST_LOOPBACK}:{emulator.port}",
        "guard_stop_credentials": {"access_key_id": "LTAIgpufleetlab", "secret_access_key": SECRET},
    }


def record(name: str) -> dict:
    events = json.loads(sh(name, f"cat {GUARD_STATE}").stdout)["events"]
    (only,) = events.values()
    return only


def test_a_spend_cap_stops_the_instance_through_the_api_exactly_once():
    with AliyunEmulator() as emulator, node() as name:
        (inst,) = emulator.seed([{"region": REGION, "instance_type": "ecs.gn7i-c8g1.2xlarge", "name": name}])
        # ECS's throttling answer to the first stop call.
        emulator.faults.throttle(1, action="StopInstance")

        # Check mode on the fresh node reports the changes and makes none:
        # no SDK environment, no stop call.
        rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(emulator, inst["instance_id"]),
                                    "--check")
        assert rc == 0 and stats.get("changed", 0) > 0, out[-4000:]
        assert sh(name, "test -e /opt/gpufleet/guard-sdk", check=False).returncode != 0
        assert emulator.count() == 0

        rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(emulator, inst["instance_id"]))
        assert rc == 0 and stats.get("failed") == 0, out[-4000:]
        assert SECRET not in out

        wait_for(lambda: emulator.stops, "the guard's stop call", 120)
        assert emulator.stops == [{"instance_id": inst["instance_id"], "stopped_mode": "StopCharging",
                                   "force_stop": "False"}]
        assert inst["state"] == "stopped"
        wait_for(lambda: record(name).get("final"), "the guard's record of its final action", 30)
        final = record(name)["final"]
        assert record(name)["reason"] == "budget"
        # The throttled call said "try again" (exit 1), the next one stopped it.
        assert final["ok"] is True and [a["rc"] for a in final["attempts"]] == [1, 0], final
        assert '"outcome": "stopped"' in final["attempts"][1]["detail"], final
        assert emulator.count("StopInstance") == 2

        # The access key is on the node in one file, which only root reads.
        assert sh(name, f"grep -rl {SECRET} /etc /var/lib /run /opt/gpufleet /usr/local || true").stdout.split() == [
            "/etc/gpufleet/guard/stop.json"]
        assert sh(name, "stat -c %a:%U /etc/gpufleet/guard/stop.json").stdout.strip() == "600:root"

        # A restarted daemon reads its state: the event is done, nothing
        # is called again, though the spend is still past the cap.
        calls = len(emulator.calls)
        before = sh(name, f"stat -c %Y {GUARD_METRICS}").stdout.strip()
        sh(name, "systemctl restart gpufleet-guard")
        wait_for(lambda: sh(name, f"stat -c %Y {GUARD_METRICS}").stdout.strip() > before,
                 "the restarted guard's first poll", 60)
        assert 'gpufleet_guard_budget_state{state="cap"} 1' in sh(name, f"cat {GUARD_METRICS}").stdout
        assert len(emulator.calls) == calls and len(emulator.stops) == 1

        # The role again changes nothing, and neither does check mode.
        rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(emulator, inst["instance_id"]))
        assert rc == 0 and stats.get("changed") == 0, out[-4000:]
        rc, out, stats = apply_role(name, "gpufleet.cloud.guard", guard_vars(emulator, inst["instance_id"]),
                                    "--check")
        assert rc == 0 and stats.get("changed") == 0, out[-4000:]
