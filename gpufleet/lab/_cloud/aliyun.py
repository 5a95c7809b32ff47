"""Alibaba Cloud ECS emulator: answers the official SDK
(alibabacloud_ecs20140526) on 127.0.0.1.

Actions: DescribeRegions, DescribeInstances (NextToken/MaxResults paging,
100 a page at most; the InstanceIds filter), DescribeInstanceTypes
(InstanceTypes.N filter), StopInstance (StoppedMode, ForceStop; a running
instance becomes stopped and the stop is recorded in ``stops``; one that is
not running is refused with IncorrectInstanceStatus, as ECS refuses it),
RebootInstance (ForceStop; recorded in ``reboots``, refused as a stop
is), DescribeInstanceHistoryEvents (the events given with
``schedule_event``; InstanceId, InstanceEventCycleStatus.N,
PageNumber/PageSize). The
answers follow the documented response shapes (Instances.Instance[],
Tags.Tag[], VpcAttributes.PrivateIpAddress.IpAddress[] ...), errors are
{"Code", "Message", "RequestId"} with an HTTP error status; throttling is
HTTP 400 "Throttling.User" as ECS sends it.

Run as a process (for the lab, or by hand):

    python -m gpufleet.lab._cloud.aliyun --port 18080 --seed seed.yml [--port-file F]

A seed file (YAML or JSON; the full format is in _server.py beside it):

    regions: [cn-hangzhou]
    instances:
      - region: cn-hangzhou
        instance_type: ecs.gn7i-c8g1.2xlarge   # a key of CATALOG below
        instance_id: i-lab1                    # default: generated
        name: lab-node-1
        private_ip: 127.0.0.11
        state: running                         # pending | running | starting | stopping | stopped
        charge: on_demand                      # on_demand | subscription | spot
        tags: {role: lab, ssh_port: "2201"}

Point the plugin at it with ``endpoint: http://127.0.0.1:18080`` and any
access key pair (ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET); ``hostnames``,
``compose`` (``ansible_port: gpufleet_tags.ssh_port | int``) and the other
options work as against the real API.
"""

from __future__ import annotations

import json
import sys

from gpufleet.lab._cloud._server import Emulator, Response, main, request_id

# instance type -> what DescribeInstanceTypes reports. A plausible slice of
# the real ECS catalogue: GPU families of several generations, one RoCE
# (SCC) family, one eRDMA family and one type without a GPU.
CATALOG = {
    "ecs.g7.xlarge": {"family": "ecs.g7", "spec": "", "count": 0, "memory_gib": 0, "eri": 0},
    "ecs.gn6i-c4g1.xlarge": {"family": "ecs.gn6i", "spec": "NVIDIA T4", "count": 1, "memory_gib": 16, "eri": 0},
    "ecs.gn6v-c8g1.2xlarge": {"family": "ecs.gn6v", "spec": "NVIDIA V100", "count": 1, "memory_gib": 16, "eri": 0},
    "ecs.gn7i-c8g1.2xlarge": {"family": "ecs.gn7i", "spec": "NVIDIA A10", "count": 1, "memory_gib": 24, "eri": 0},
    "ecs.gn7i-c32g1.32xlarge": {"family": "ecs.gn7i", "spec": "NVIDIA A10", "count": 4, "memory_gib": 24, "eri": 0},
    "ecs.gn7e-c16g1.4xlarge": {"family": "ecs.gn7e", "spec": "NVIDIA A100", "count": 1, "memory_gib": 80, "eri": 0},
    "ecs.ebmgn7ex.32xlarge": {"family": "ecs.ebmgn7ex", "spec": "NVIDIA A100", "count": 8, "memory_gib": 80, "eri": 2},
    "ecs.sccgn7ex.32xlarge": {"family": "ecs.sccgn7ex", "spec": "NVIDIA A100", "count": 8, "memory_gib": 80, "eri": 0,
                              "rdma": True},
    "ecs.gn8is-2x.8xlarge": {"family": "ecs.gn8is", "spec": "NVIDIA L20", "count": 2, "memory_gib": 48, "eri": 0},
    "ecs.gn8v-8x.48xlarge": {"family": "ecs.gn8v", "spec": "NVIDIA H20", "count": 8, "memory_gib": 96, "eri": 4},
    # A vGPU type: a twelfth of an A10 (2 GiB of its 24), as Elastic GPU
    # Service's vGPU-accelerated instance families page lists sgn7i-vws;
    # its slice is in GPUSpec, and the SDK's GPUAmount is a whole number.
    "ecs.sgn7i-vws-m2.xlarge": {"family": "ecs.sgn7i-vws", "spec": "NVIDIA A10 * 1/12", "count": 1,
                                "memory_gib": 2, "eri": 0},
}

_STATES = {"pending": "Pending", "running": "Running", "starting": "Starting", "stopping": "Stopping",
           "stopped": "Stopped"}
MAX_RESULTS = 100


class AliyunEmulator(Emulator):
    name = "aliyun"
    CATALOG = CATALOG

    def route(self, request):
        params = request.form()
        action = request.headers.get("x-acs-action") or params.get("Action")
        return action, params.get("RegionId")

    def answer(self, request, action, region):
        params = request.form()
        if action == "DescribeRegions":
            return Response(200, {"RequestId": request_id(), "Regions": {"Region": [
                {"RegionId": r, "LocalName": r, "RegionEndpoint": "ecs.%s.aliyuncs.com" % r, "Status": "available"}
                for r in self.regions]}})
        if action == "DescribeInstances":
            return self._instances(params, region)
        if action == "StopInstance":
            return self._stop(params)
        if action == "RebootInstance":
            return self._reboot(params)
        if action == "DescribeInstanceHistoryEvents":
            return self._events(params, region)
        if action == "DescribeInstanceTypes":
            wanted = [v for k, v in sorted(params.items()) if k.startswith("InstanceTypes.")]
            # DescribeInstanceTypes names no region: a gpu_fields_missing
            # fault on it, for any region, holds for every caller.
            hollow_gpus = any(a == action for _r, a in self.faults.gpu_fields_missing)
            return Response(200, {"RequestId": request_id(), "NextToken": "", "InstanceTypes": {"InstanceType": [
                _without(_instance_type(name), hollow_gpus, _TYPE_GPU_FIELDS) for name in wanted or sorted(CATALOG)
                if name in CATALOG and name not in self.faults.unoffered_types.get(region, ())]}})
        return _error(400, "InvalidAction.NotFound", "Specified api is not found, please check your url and method.")

    def _instances(self, params, region):
        if region not in self.regions:
            return _error(404, "InvalidRegionId.NotFound", "The specified RegionId does not exist.")
        size = int(params.get("MaxResults") or 10)
        if not 1 <= size <= MAX_RESULTS:
            return _error(400, "InvalidParameter.MaxResults", "The specified parameter MaxResults is not valid.")
        token = params.get("NextToken") or ""
        start = int(token, 16) if token else 0
        everything = self.instances.get(region, [])
        if params.get("InstanceIds"):
            # A JSON array of ids, at most 100, as the API takes it.
            wanted = json.loads(params["InstanceIds"])
            everything = [i for i in everything if i["instance_id"] in wanted]
        page = everything[start:start + size]
        end = start + len(page)
        return Response(200, {
            "RequestId": request_id(),
            "NextToken": "%08x" % end if end < len(everything) else "",
            "TotalCount": len(everything),
            "Instances": {"Instance": [
                _without(_instance(i), (region, "DescribeInstances") in self.faults.gpu_fields_missing,
                         _INSTANCE_GPU_FIELDS) for i in page]},
        })

    def _events(self, params, region):
        if region not in self.regions:
            return _error(404, "InvalidRegionId.NotFound", "The specified RegionId does not exist.")
        states = [v for k, v in params.items() if k.startswith("InstanceEventCycleStatus.")]
        found = [e for e in self.events_of([params.get("InstanceId")])
                 if not states or e.get("EventCycleStatus", {}).get("Name") in states]
        number, size = int(params.get("PageNumber") or 1), int(params.get("PageSize") or 10)
        if not 1 <= size <= MAX_RESULTS:
            return _error(400, "InvalidParameter.PageSize", "The specified parameter PageSize is not valid.")
        return Response(200, {
            "RequestId": request_id(), "PageNumber": number, "PageSize": size,
            "TotalCount": len(found) + self.faults.total_skew.get(region, 0),
            "InstanceSystemEventSet": {"InstanceSystemEventType": found[(number - 1) * size:number * size]}})

    def _stop(self, params):
        inst, refused = self._running(params)
        if refused:
            return refused
        self.stop_instance(inst, stopped_mode=params.get("StoppedMode"), force_stop=params.get("ForceStop"))
        return Response(200, {"RequestId": request_id()})

    def _reboot(self, params):
        inst, refused = self._running(params)
        if refused:
            return refused
        self.reboot_instance(inst, force_stop=params.get("ForceStop"))
        return Response(200, {"RequestId": request_id()})

    def _running(self, params):
        """The instance a stop or reboot names, or ECS's refusal: one it
        does not know, one that is not running."""
        inst = self.find(params.get("InstanceId"))
        if inst is None:
            return None, _error(404, "InvalidInstanceId.NotFound", "The specified InstanceId does not exist.")
        if inst["state"] != "running":
            return inst, _error(403, "IncorrectInstanceStatus", "The current status of the resource does not "
                                "support this operation.")
        return inst, None

    def throttled(self, action, region):
        return _error(400, "Throttling.User", "Request was denied due to user flow control.")

    def credentials_rejected(self, kind, request):
        # ECS's answers: an AccessKey ID it does not know, a secret that
        # does not sign as the key's.
        if kind == "unknown_key":
            return _error(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found.")
        return _error(400, "SignatureDoesNotMatch", "Specified signature does not match our calculation.")

    def unavailable(self, action, region):
        return _error(503, "ServiceUnavailable", "The request has failed due to a temporary failure of the server.")

    def hollow(self, action, region):
        return Response(200, {"RequestId": request_id()})


# What Faults.gpu_fields_missing takes out of an answer.
_INSTANCE_GPU_FIELDS = ("GPUSpec", "GPUAmount")
_TYPE_GPU_FIELDS = ("GPUSpec", "GPUAmount", "GPUMemorySize")


def _without(body, drop, fields):
    return {k: v for k, v in body.items() if k not in fields} if drop else body


def _error(status, code, message):
    return Response(status, {"RequestId": request_id(), "HostId": "ecs.aliyuncs.com", "Code": code, "Message": message})


def _instance_type(name):
    spec = CATALOG[name]
    return {
        "InstanceTypeId": name,
        "InstanceTypeFamily": spec["family"],
        "GPUSpec": spec["spec"],
        "GPUAmount": spec["count"],
        "GPUMemorySize": float(spec["memory_gib"]),
        "EriQuantity": spec["eri"],
        "CpuCoreCount": 8,
        "MemorySize": 32.0,
    }


def _instance(inst):
    spec = CATALOG[inst["instance_type"]]
    spot = inst["charge"] == "spot"
    body = {
        "InstanceId": inst["instance_id"],
        "InstanceName": inst["name"],
        "HostName": inst["name"],
        "RegionId": inst["region"],
        "ZoneId": inst["zone"],
        "InstanceType": inst["instance_type"],
        "InstanceTypeFamily": spec["family"],
        "Status": _STATES[inst["state"]],
        "InstanceNetworkType": "vpc",
        "InstanceChargeType": "PrePaid" if inst["charge"] == "subscription" else "PostPaid",
        "SpotStrategy": "SpotAsPriceGo" if spot else "NoSpot",
        "GPUSpec": spec["spec"],
        "GPUAmount": spec["count"],
        "Cpu": 8,
        "Memory": 32768,
        "OSType": "linux",
        "CreationTime": "2026-11-01T08:00Z",
        "VpcAttributes": {
            "VpcId": "vpc-emulated",
            "VSwitchId": "vsw-emulated",
            "PrivateIpAddress": {"IpAddress": [inst["private_ip"]] if inst["private_ip"] else []},
            "NatIpAddress": "",
        },
        "InnerIpAddress": {"IpAddress": []},
        "PublicIpAddress": {"IpAddress": [inst["public_ip"]] if inst["public_ip"] else []},
        "EipAddress": {"IpAddress": "", "AllocationId": "", "InternetChargeType": ""},
        "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in inst["tags"].items()]},
    }
    if spec.get("rdma") and inst["private_ip"]:
        body["RdmaIpAddress"] = {"IpAddress": ["192.168.%s" % inst["private_ip"].split(".", 2)[-1]]}
    return body


if __name__ == "__main__":
    sys.exit(main(AliyunEmulator))
