"""Tencent Cloud CVM emulator: answers the official SDK
(tencentcloud-sdk-python-cvm) on 127.0.0.1.

Actions (from the X-TC-Action header, region from X-TC-Region):
DescribeRegions, DescribeInstances (Offset/Limit paging, Limit at most
100; the InstanceIds filter), DescribeInstanceTypeConfigs (zone,
instance-family and instance-type filters, one value each as the API
allows), StopInstances (StoppedMode, StopType; running instances become
stopped and each stop is recorded in ``stops``; a stopped one is refused
with UnsupportedOperation.InstanceStateStopped, as CVM refuses it),
RebootInstances (StopType; each reboot recorded in ``reboots``, refused
as a stop is), DescribeTaskInfo (the repair tasks given with
``schedule_event``; InstanceIds, TaskStatus, Offset/Limit). Every answer is HTTP 200 with
{"Response": {...}}; errors are {"Response": {"Error": {"Code", "Message"}}},
throttling is "RequestLimitExceeded", as CVM sends them.

    python -m tests.emulators.tencent --port 18081 --seed seed.yml

Seed format: see gpufleet/lab/_cloud/_server.py.
"""

from __future__ import annotations

import sys
import uuid

from gpufleet.lab._cloud._server import Emulator, Response, main, request_id

# instance type -> DescribeInstanceTypeConfigs facts. GpuCount below 1 is a
# vGPU slice, as the API reports it.
CATALOG = {
    "S5.LARGE8": {"type": "", "count": 0, "memory_gib": 0},
    "GN7.2XLARGE32": {"type": "NVIDIA T4", "count": 1, "memory_gib": 16},
    "GN7.20XLARGE320": {"type": "NVIDIA T4", "count": 4, "memory_gib": 16},
    "GN10Xp.2XLARGE40": {"type": "NVIDIA Tesla V100-NVLINK-32G", "count": 1, "memory_gib": 32},
    "GT4.4XLARGE96": {"type": "NVIDIA A100 NVLink 40GB", "count": 1, "memory_gib": 40},
    "PNV4.7XLARGE116": {"type": "NVIDIA A10", "count": 1, "memory_gib": 24},
    "GNV4.3XLARGE46": {"type": "NVIDIA A10", "count": 0.25, "memory_gib": 6},
    "HCCPNV4h.48XLARGE1152": {"type": "NVIDIA A800", "count": 8, "memory_gib": 80},
    "HCCPNV5.48XLARGE1536": {"type": "NVIDIA H800", "count": 8, "memory_gib": 80},
}

_STATES = {"pending": "PENDING", "running": "RUNNING", "stopping": "STOPPING", "stopped": "STOPPED",
           "rebooting": "REBOOTING", "terminating": "TERMINATING", "error": "LAUNCH_FAILED"}
_CHARGE = {"on_demand": "POSTPAID_BY_HOUR", "subscription": "PREPAID", "spot": "SPOTPAID"}
MAX_LIMIT = 100


class TencentEmulator(Emulator):
    name = "tencent"
    CATALOG = CATALOG

    def new_instance_id(self):
        return "ins-" + uuid.uuid4().hex[:8]

    def route(self, request):
        return request.headers.get("X-TC-Action"), request.headers.get("X-TC-Region")

    def answer(self, request, action, region):
        params = request.json()
        if action == "DescribeRegions":
            return _ok({"TotalCount": len(self.regions), "RegionSet": [
                {"Region": r, "RegionName": r, "RegionState": "AVAILABLE"} for r in self.regions]})
        if region not in self.regions:
            return _error("InvalidRegion", "The region `%s` is not supported." % region)
        if action == "DescribeInstances":
            limit = int(params.get("Limit", 20))
            offset = int(params.get("Offset", 0))
            if not 1 <= limit <= MAX_LIMIT:
                return _error("InvalidParameterValue.Limit", "Limit must be between 1 and 100.")
            everything = self.instances.get(region, [])
            if params.get("InstanceIds"):
                everything = [i for i in everything if i["instance_id"] in params["InstanceIds"]]
            return _ok({"TotalCount": len(everything) + self.faults.total_skew.get(region, 0),
                        "InstanceSet": [_instance(i, (region, action) in self.faults.gpu_fields_missing)
                                        for i in everything[offset:offset + limit]]})
        if action == "StopInstances":
            return self._stop(params)
        if action == "RebootInstances":
            return self._reboot(params)
        if action == "DescribeTaskInfo":
            limit, offset = int(params.get("Limit", 20)), int(params.get("Offset", 0))
            if not 1 <= limit <= MAX_LIMIT:
                return _error("InvalidParameterValue.Limit", "Limit must be between 1 and 100.")
            found = [t for t in self.events_of(params.get("InstanceIds") or ())
                     if not params.get("TaskStatus") or t.get("TaskStatus") in params["TaskStatus"]]
            return _ok({"TotalCount": len(found) + self.faults.total_skew.get(region, 0),
                        "RepairTaskInfoSet": found[offset:offset + limit]})
        if action == "DescribeInstanceTypeConfigs":
            filters = {f["Name"]: f["Values"] for f in params.get("Filters") or ()}
            if any(len(v) != 1 for v in filters.values()):
                return _error("InvalidParameterValue.LimitExceeded", "Filter.Values accepts one value.")
            zones = sorted({i["zone"] for i in self.instances.get(region, [])}) or [region + "-1"]
            hollow_gpus = (region, action) in self.faults.gpu_fields_missing
            configs = [
                _type_config(name, zone, hollow_gpus) for zone in zones for name in sorted(CATALOG)
                if name not in self.faults.unoffered_types.get(region, ())
                and filters.get("zone", [zone])[0] == zone
                and filters.get("instance-type", [name])[0] == name
                and filters.get("instance-family", [name.split(".")[0]])[0] == name.split(".")[0]
            ]
            return _ok({"InstanceTypeConfigSet": configs})
        return _error("InvalidAction", "The action `%s` is not supported." % action)

    def _stop(self, params):
        found, refused = self._running(params)
        if refused:
            return refused
        for inst in found:
            self.stop_instance(inst, stopped_mode=params.get("StoppedMode"), stop_type=params.get("StopType"))
        return _ok({})

    def _reboot(self, params):
        found, refused = self._running(params)
        if refused:
            return refused
        for inst in found:
            self.reboot_instance(inst, stop_type=params.get("StopType"))
        return _ok({})

    def _running(self, params):
        """The instances a stop or reboot names, or CVM's refusal: one it
        does not know, one stopped, one in another operation."""
        found = [self.find(i) for i in params.get("InstanceIds") or ()]
        if not found or None in found:
            return found, _error("InvalidInstanceId.NotFound", "The instance `%s` does not exist."
                                 % ",".join(params.get("InstanceIds") or ()))
        if any(inst["state"] == "stopped" for inst in found):
            return found, _error("UnsupportedOperation.InstanceStateStopped", "The instance is already stopped.")
        if any(inst["state"] != "running" for inst in found):
            return found, _error("OperationDenied.InstanceOperationInProgress", "The instance is in an operation.")
        return found, None

    def throttled(self, action, region):
        return _error("RequestLimitExceeded", "Your current request times equals to `21` in a second, "
                      "which exceeds the frequency limit `20` for a second. Please reduce the frequency of calls.")

    def credentials_rejected(self, kind, request):
        # CVM's answers (HTTP 200, as every CVM error): a SecretId it does
        # not know, a SecretKey that does not sign as the id's.
        if kind == "unknown_key":
            return _error("AuthFailure.SecretIdNotFound",
                          "The SecretId is not found, please ensure that your SecretId is correct.")
        return _error("AuthFailure.SignatureFailure",
                      "The provided credentials could not be validated. Please check your signature is correct.")

    def unavailable(self, action, region):
        return _error("InternalError", "An internal error has occurred. Retry your request.")

    def hollow(self, action, region):
        # Neither InstanceSet nor TotalCount, and no Error either.
        return _ok({})


def _ok(body):
    body["RequestId"] = request_id().lower()
    return Response(200, {"Response": body})


def _error(code, message):
    return _ok({"Error": {"Code": code, "Message": message}})


def _type_config(name, zone, hollow_gpus=False):
    spec = CATALOG[name]
    config = {"Zone": zone, "InstanceType": name, "InstanceFamily": name.split(".")[0], "CPU": 8, "Memory": 32,
              "GPU": int(spec["count"] * 100), "FPGA": 0, "GpuCount": float(spec["count"]),
              "GpuType": spec["type"], "GpuMemory": float(spec["memory_gib"])}
    if hollow_gpus:
        # Faults.gpu_fields_missing: the GPU fields null.
        config.update(GPU=None, GpuCount=None, GpuType=None, GpuMemory=None)
    return config


def _instance(inst, hollow_gpus=False):
    spec = CATALOG[inst["instance_type"]]
    body = {
        "InstanceId": inst["instance_id"],
        "InstanceName": inst["name"],
        "InstanceType": inst["instance_type"],
        "InstanceState": _STATES[inst["state"]],
        "InstanceChargeType": _CHARGE[inst["charge"]],
        "Placement": {"Zone": inst["zone"], "ProjectId": 0},
        "PrivateIpAddresses": [inst["private_ip"]] if inst["private_ip"] else [],
        "PublicIpAddresses": [inst["public_ip"]] if inst["public_ip"] else None,
        "Tags": [{"Key": k, "Value": v} for k, v in inst["tags"].items()],
        "CPU": 8,
        "Memory": 32,
        "OsName": "Debian Server 12.0 64bit",
        "CreatedTime": "2026-11-01T08:00:00Z",
        "VirtualPrivateCloud": {"VpcId": "vpc-emulated", "SubnetId": "subnet-emulated"},
        "RdmaIpAddresses": ["192.168.%s" % inst["private_ip"].split(".", 2)[-1]]
        if name_is_hcc(inst["instance_type"]) and inst["private_ip"] else None,
        "GPUInfo": {"GPUCount": float(spec["count"]), "GPUId": [], "GPUType": spec["type"]} if spec["count"] else None,
    }
    if hollow_gpus and body["GPUInfo"]:
        # Faults.gpu_fields_missing: a GPU instance's GPUInfo with its fields null.
        body["GPUInfo"] = {"GPUCount": None, "GPUId": [], "GPUType": None}
    return body


def name_is_hcc(instance_type):
    return instance_type.upper().startswith("HCC")


if __name__ == "__main__":
    sys.exit(main(TencentEmulator))
