"""Huawei Cloud ECS (and the bit of IAM it needs) emulator: answers the
official SDKs (huaweicloudsdkecs, huaweicloudsdkiam) on 127.0.0.1.

Each region is an IAM project with its own id, as on Huawei Cloud; the
project id in the ECS path tells the emulator the region.

- IAM: GET /v3/auth/domains, GET /v3/auth/projects (the account's regions),
  GET /v3/projects?name=REGION (the SDK's project id lookup).
- ECS: GET /v1/{project_id}/cloudservers/detail (``offset`` is a page
  number from 1, ``limit`` at most 1000), GET /v1/{project_id}/cloudservers/flavors,
  GET /v1/{project_id}/cloudservers/{server_id} (ShowServer), and POST
  /v1/{project_id}/cloudservers/action with ``os-stop`` (BatchStopServers):
  its running servers become stopped (SHUTOFF), each stop recorded in
  ``stops``, and the answer is the asynchronous job's id, as ECS answers.
  A server that is already stopped is left as it is. The same path with
  ``reboot`` (BatchRebootServers) records each running server's reboot in
  ``reboots``; it stays ACTIVE.
- /v3/{project_id}/instance-scheduled-events (ListScheduledEvents): the
  events given with ``schedule_event``; instance_id, state, limit, marker.
- Errors: {"error": {"code", "message"}} with an HTTP error status;
  throttling is HTTP 429 with the API gateway's {"error_code": "APIGW.0308"}.

    python -m tests.emulators.huawei --port 18082 --seed seed.yml

Point the plugin at it with ``endpoint`` and ``iam_endpoint`` both set to
the emulator's URL. Seed format: see gpufleet/lab/_cloud/_server.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import uuid

from gpufleet.lab._cloud._server import Emulator, Response, main, request_id

# flavor -> what the server's flavor and ListFlavors report. p1 is an old
# flavor whose servers carry no GPU list: its GPU comes from the PCI alias.
# g1 is a vGPU flavor: its gpu_specs name an M60-1Q profile, 1 GiB of an
# M60 (the form the ECS API reference gives for pci_passthrough:gpu_specs,
# "m60_1q:virt:1").
CATALOG = {
    "s6.large.2": {"gpus": [], "alias": None, "features": ""},
    "pi2.2xlarge.4": {"gpus": [("NVIDIA-T4", 1, 16384)], "alias": "nvidia-t4:1", "features": ""},
    "p1.2xlarge.8": {"gpus": None, "alias": "nvidia-p100:1", "features": ""},
    "p2v.2xlarge.8": {"gpus": [("NVIDIA-V100", 1, 16384)], "alias": "nvidia-v100:1", "features": ""},
    "p3.2xlarge.8": {"gpus": [("NVIDIA-A100-80G", 1, 81920)], "alias": "nvidia-a100:1", "features": ""},
    "p3.16xlarge.8": {"gpus": [("NVIDIA-A100-80G", 8, 81920)], "alias": "nvidia-a100:8", "features": "ib,nvlink"},
    "pi5e.4xlarge.4": {"gpus": [("NVIDIA-L40S", 2, 49152)], "alias": "nvidia-l40s:2", "features": "roce"},
    "g1.xlarge": {"gpus": None, "alias": None, "gpu_specs": "m60_1q:virt:1", "features": ""},
}

_STATES = {"pending": "BUILD", "running": "ACTIVE", "stopped": "SHUTOFF", "rebooting": "REBOOT",
           "error": "ERROR", "terminating": "SOFT_DELETED", "terminated": "DELETED"}
_CHARGE = {"on_demand": "0", "subscription": "1", "spot": "2"}
MAX_LIMIT = 1000
DOMAIN_ID = "0" * 24 + "d0ma1n00"
_ACCESS = re.compile(r"Access=([^,\s]+)")
_ECS_PATH = re.compile(r"^/v1/([0-9a-f]{32})/cloudservers/([^/]+)$")
_ECS_ACTIONS = {"detail": "ListServersDetails", "flavors": "ListFlavors", "action": "BatchStopServers"}
_EVENTS_PATH = re.compile(r"^/v3/([0-9a-f]{32})/instance-scheduled-events$")


def project_id(region):
    """A stable 32-hex project id per region, as IAM hands out."""
    return hashlib.md5(region.encode()).hexdigest()


class HuaweiEmulator(Emulator):
    name = "huawei"
    CATALOG = CATALOG

    def new_instance_id(self):
        return str(uuid.uuid4())

    def route(self, request):
        match = _ECS_PATH.match(request.path)
        if match:
            action = _ECS_ACTIONS.get(match.group(2), "ShowServer")
            if action == "BatchStopServers" and "reboot" in request.json():
                action = "BatchRebootServers"
            region = next((r for r in self.regions if project_id(r) == match.group(1)), match.group(1))
            return action, region
        match = _EVENTS_PATH.match(request.path)
        if match:
            return "ListScheduledEvents", next((r for r in self.regions if project_id(r) == match.group(1)),
                                               match.group(1))
        actions = {"/v3/auth/domains": "KeystoneListAuthDomains", "/v3/auth/projects": "KeystoneListAuthProjects",
                   "/v3/projects": "KeystoneListProjects"}
        return actions.get(request.path, request.path), None

    def answer(self, request, action, region):
        if action == "KeystoneListAuthDomains":
            return Response(200, {"domains": [{"id": DOMAIN_ID, "name": "gpufleet", "enabled": True,
                                               "links": {"self": "/v3/domains/" + DOMAIN_ID}}]})
        if action in ("KeystoneListAuthProjects", "KeystoneListProjects"):
            names = [request.query["name"]] if request.query.get("name") else ["MOS"] + self.regions
            return Response(200, {"projects": [_project(n) for n in names if n == "MOS" or n in self.regions],
                                  "links": {"self": request.path}})
        if region not in self.regions:
            return _error(404, "Ecs.0114", "The project does not exist.")
        if action == "ShowServer":
            inst = self.find(request.path.rsplit("/", 1)[1])
            if inst is None or inst["region"] != region:
                return _error(404, "Ecs.0114", "Instance[%s] could not be found." % request.path.rsplit("/", 1)[1])
            return Response(200, {"server": _server(inst)})
        if action in ("BatchStopServers", "BatchRebootServers"):
            return self._batch(request, region, action)
        if action == "ListScheduledEvents":
            return self._events(request.query)
        if action == "ListFlavors":
            hollow_gpus = (region, action) in self.faults.gpu_fields_missing
            return Response(200, {"flavors": [_flavor(name, hollow_gpus) for name in sorted(CATALOG)
                                              if name not in self.faults.unoffered_types.get(region, ())]})
        if action == "ListServersDetails":
            limit = int(request.query.get("limit") or 25)
            page = max(int(request.query.get("offset") or 1), 1)
            if not 1 <= limit <= MAX_LIMIT:
                return _error(400, "Ecs.0005", "Invalid limit: must be between 1 and 1000.")
            everything = self.instances.get(region, [])
            start = (page - 1) * limit
            return Response(200, {"count": len(everything) + self.faults.total_skew.get(region, 0),
                                  "servers": [_server(s, (region, action) in self.faults.gpu_fields_missing)
                                              for s in everything[start:start + limit]]})
        return _error(404, "APIGW.0101", "The API does not exist or has not been published in the environment.")

    def _events(self, query):
        # The SDK writes its lists comma-separated (collection format csv).
        states = [v for v in (query.get("state") or "").split(",") if v]
        found = [e for e in self.events_of((query.get("instance_id") or "").split(","))
                 if not states or e.get("state") in states]
        limit = int(query.get("limit") or 100)
        start = next((i + 1 for i, e in enumerate(found) if e.get("id") == query.get("marker")), 0)
        page = found[start:start + limit]
        more = start + limit < len(found)
        return Response(200, {"events": page, "page_info": {"next_marker": page[-1]["id"] if more else None}})

    def _batch(self, request, region, action):
        stop = action == "BatchStopServers"
        order = request.json().get("os-stop" if stop else "reboot") or {}
        servers = [self.find(s.get("id")) for s in order.get("servers") or ()]
        if not servers or None in servers or any(s["region"] != region for s in servers):
            return _error(404, "Ecs.0114", "Instance could not be found.")
        for inst in servers:
            if inst["state"] == "running":
                (self.stop_instance if stop else self.reboot_instance)(inst, type=order.get("type"))
        return Response(200, {"job_id": uuid.uuid4().hex})

    def throttled(self, action, region):
        return Response(429, {"error_code": "APIGW.0308", "request_id": request_id(),
                              "error_msg": "The throttling threshold has been reached: policy user over ratelimit"})

    def credentials_rejected(self, kind, request):
        # The API gateway's answer, for ECS and IAM alike: HTTP 401,
        # APIGW.0301. Like the real one, it names the AK it refused (an AK
        # is no secret; the SK never travels).
        match = _ACCESS.search(request.headers.get("Authorization") or "")
        reason = "ak %s not exist" % (match.group(1) if match else "") if kind == "unknown_key" \
            else "verify aksk signature fail"
        return Response(401, {"error_code": "APIGW.0301", "request_id": request_id(),
                              "error_msg": "Incorrect IAM authentication information: " + reason})

    def unavailable(self, action, region):
        return _error(503, "Ecs.0000", "The ECS service is temporarily unavailable in this region.")

    def hollow(self, action, region):
        return Response(200, {"request_id": request_id()})


def _error(status, code, message):
    return Response(status, {"error": {"code": code, "message": message}})


def _project(name):
    pid = project_id(name)
    return {"id": pid, "name": name, "domain_id": DOMAIN_ID, "enabled": True, "is_domain": False,
            "parent_id": DOMAIN_ID, "description": "", "links": {"self": "/v3/projects/" + pid}}


def _gpus(name):
    gpus = CATALOG[name]["gpus"]
    return None if gpus is None else [{"name": n, "count": c, "memory_mb": m} for n, c, m in gpus]


def _flavor(name, hollow_gpus=False):
    spec = CATALOG[name]
    gpu_flavor = spec["alias"] or spec.get("gpu_specs")
    extra = {"ecs:performancetype": "gpu" if gpu_flavor else "normal", "resource_type": "IOoptimized"}
    # Faults.gpu_fields_missing: a GPU flavor (by its performance type)
    # without info:gpus and without the PCI alias's GPU list.
    gpus = None if hollow_gpus else _gpus(name)
    if gpus:
        extra["info:gpus"] = json.dumps(gpus)
    if spec["alias"] and not hollow_gpus:
        extra["pci_passthrough:alias"] = spec["alias"]
        extra["pci_passthrough:enable_gpu"] = "true"
    if spec.get("gpu_specs") and not hollow_gpus:
        extra["pci_passthrough:gpu_specs"] = spec["gpu_specs"]
    if spec["features"]:
        extra["info:features"] = spec["features"]
    return {"id": name, "name": name, "vcpus": "8", "ram": 65536, "disk": "0", "swap": "",
            "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False, "rxtx_factor": 1,
            "os-flavor-access:is_public": True, "links": [], "os_extra_specs": extra}


def _server(inst, hollow_gpus=False):
    addresses = []
    if inst["private_ip"]:
        addresses.append({"version": "4", "addr": inst["private_ip"], "OS-EXT-IPS:type": "fixed",
                          "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01", "OS-EXT-IPS:port_id": str(uuid.uuid4())})
    if inst["public_ip"]:
        addresses.append({"version": "4", "addr": inst["public_ip"], "OS-EXT-IPS:type": "floating",
                          "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01", "OS-EXT-IPS:port_id": str(uuid.uuid4())})
    flavor = {"id": inst["instance_type"], "name": inst["instance_type"], "disk": "0", "vcpus": "8", "ram": "65536"}
    gpus = _gpus(inst["instance_type"])
    if gpus is not None and not hollow_gpus:
        flavor["gpus"] = gpus
    return {
        "id": inst["instance_id"],
        "name": inst["name"],
        "status": _STATES[inst["state"]],
        "flavor": flavor,
        "addresses": {"vpc-emulated": addresses},
        "OS-EXT-AZ:availability_zone": inst["zone"],
        "OS-EXT-STS:vm_state": "active",
        "metadata": {"charging_mode": _CHARGE[inst["charge"]], "vpc_id": "vpc-emulated", "os_type": "Linux"},
        "tags": ["%s=%s" % (k, v) for k, v in inst["tags"].items()],
        "tenant_id": project_id(inst["region"]),
        "user_id": "emulated",
        "created": "2026-11-01T08:00:00Z",
        "updated": "2026-11-01T08:00:00Z",
        "image": {"id": "emulated-image"},
        "security_groups": [],
    }


if __name__ == "__main__":
    sys.exit(main(HuaweiEmulator))
