"""AWS EC2 emulator: moto's server behind a thin fault-injecting proxy.

moto answers EC2 (instances, GPU instance types with GpuInfo, spot
instances) with the real response shapes; the proxy in front of it adds
what moto lacks: injected throttling (EC2's RequestLimitExceeded, HTTP
503), a failed region and latency. It answers DescribeRegions itself with
the seeded regions, as the other emulators do, rather than moto's thirty. Both listen on 127.0.0.1. The
region of a request is read from its SigV4 credential scope, as moto does.

    python -m tests.emulators.aws --port 18083 --seed seed.yml

Seed format: see gpufleet/lab/_cloud/_server.py. moto chooses the instance ids
and private addresses itself; ``seed`` returns what it chose. moto gives
every instance a private address; one seeded with ``private_ip: null`` has
it taken out of the DescribeInstances answers by the proxy.
"""

from __future__ import annotations

import http.client
import logging
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

import boto3
from moto.ec2.models.instance_types import INSTANCE_TYPES
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

from gpufleet.lab._cloud._server import LOOPBACK, Emulator, Response, main, request_id

# GPU types (and one without a GPU) the fleet generator draws from; any
# type moto knows can be seeded.
CATALOG = {
    "m5.large": {},
    "g4dn.xlarge": {},
    "g5.2xlarge": {},
    "g6e.xlarge": {},
    "p3dn.24xlarge": {},
    "p4d.24xlarge": {},
    "p5.48xlarge": {},
}
IMAGE_ID = "ami-12c6146b"
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
# The fields of an instance that carry its private address, at its top level.
_PRIVATE_FIELDS = ("privateIpAddress", "privateDnsName")


class AwsEmulator(Emulator):
    name = "aws"
    CATALOG = CATALOG

    def __init__(self, regions=None):
        super().__init__(regions)
        self._moto = None
        self.moto_url = None
        # Instances seeded with private_ip null; see the module docstring.
        self.without_private_ip = set()

    def known_type(self, name):
        # Any type moto knows, not only the generator's few.
        return name in INSTANCE_TYPES

    def default_zone(self, region):
        return region + "a"

    def start(self, port=0):
        # werkzeug logs every request moto serves; a test's output is for the test.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._moto = ThreadedMotoServer(ip_address=LOOPBACK, port=0, verbose=False)
        self._moto.start()
        host, moto_port = self._moto.get_host_and_port()
        self.moto_url = "http://%s:%d" % (host, moto_port)
        # moto's state is global to the process: start from an empty cloud.
        conn = http.client.HTTPConnection(host, moto_port, timeout=30)
        conn.request("POST", "/moto-api/reset")
        conn.getresponse().read()
        conn.close()
        return super().start(port)

    def stop(self):
        super().stop()
        if self._moto:
            self._moto.stop()
            self._moto = None

    # -- seeding through moto's own API -----------------------------------
    def ec2(self, region):
        return boto3.client("ec2", region_name=region, endpoint_url=self.moto_url,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def seed(self, instances, regions=None, reservation_size=None):
        """Seed through moto. Identical instances share a RunInstances call
        (one reservation), at most ``reservation_size`` of them."""
        specs = []
        bare = []
        for index, spec in enumerate(instances):
            no_address = "private_ip" in spec and not spec["private_ip"]
            spec = self.complete(dict(spec, instance_id=None, name=spec.get("name")), index)
            if no_address:
                bare.append(spec)
            # moto assigns ids and addresses itself.
            spec["private_ip"] = spec["public_ip"] = None
            specs.append(spec)
        # One RunInstances call per identical group: seeding thousands of
        # instances one by one would take minutes.
        groups = defaultdict(list)
        for spec in specs:
            key = (spec["region"], spec["zone"], spec["instance_type"], spec["charge"], spec["state"],
                   tuple(sorted(spec["tags"].items())), spec["name"])
            groups[key].append(spec)
        batches = []
        for key, members in groups.items():
            size = reservation_size or len(members)
            batches.extend((key, members[i:i + size]) for i in range(0, len(members), size))
        clients = {}
        for (region, zone, itype, charge, state, tags, name), members in batches:
            ec2 = clients.get(region) or clients.setdefault(region, self.ec2(region))
            tag_list = [{"Key": k, "Value": v} for k, v in tags]
            if name and not any(pair[0] == "Name" for pair in tags):
                tag_list.append({"Key": "Name", "Value": name})
            kwargs = {"ImageId": IMAGE_ID, "InstanceType": itype, "MinCount": len(members),
                      "MaxCount": len(members), "Placement": {"AvailabilityZone": zone}}
            if tag_list:
                kwargs["TagSpecifications"] = [{"ResourceType": "instance", "Tags": tag_list}]
            if charge == "spot":
                kwargs["InstanceMarketOptions"] = {"MarketType": "spot"}
            made = ec2.run_instances(**kwargs)["Instances"]
            ids = [i["InstanceId"] for i in made]
            if state == "stopped":
                ec2.stop_instances(InstanceIds=ids)
            elif state == "terminated":
                ec2.terminate_instances(InstanceIds=ids)
            for spec, inst in zip(members, made):
                spec["instance_id"] = inst["InstanceId"]
                spec["private_ip"] = inst.get("PrivateIpAddress")
                spec["public_ip"] = inst.get("PublicIpAddress")
        for spec in bare:
            self.without_private_ip.add(spec["instance_id"])
            spec["private_ip"] = None
        for spec in specs:
            self.instances.setdefault(spec["region"], []).append(spec)
            if spec["region"] not in self.regions:
                self.regions.append(spec["region"])
        return specs

    # -- proxy ------------------------------------------------------------
    def route(self, request):
        match = _SCOPE.search(request.headers.get("Authorization") or "")
        return request.form().get("Action"), match.group(1) if match else None

    def answer(self, request, action, region):
        if action == "DescribeRegions":
            # The emulated account has the seeded regions, not all of moto's.
            items = "".join("<item><regionName>%s</regionName><regionEndpoint>ec2.%s.amazonaws.com</regionEndpoint>"
                            "<optInStatus>opt-in-not-required</optInStatus></item>" % (r, r) for r in self.regions)
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<DescribeRegionsResponse '
                    'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>%s</requestId>'
                    "<regionInfo>%s</regionInfo></DescribeRegionsResponse>" % (request_id(), items))
            return Response(200, body.encode(), "text/xml;charset=UTF-8")
        if action == "DescribeInstanceTypes":
            # Real EC2 refuses the whole call when one type of the batch is
            # not offered in the region, naming it.
            asked = [v for k, v in request.form().items() if k.startswith("InstanceType.")]
            refused = sorted(set(asked) & set(self.faults.unoffered_types.get(region, ())))
            if refused:
                return _error(400, "InvalidInstanceType",
                              "The following supplied instance types do not exist: [%s]" % ", ".join(refused))
        host, port = self.moto_url.rsplit("//", 1)[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        target = request.path + ("?" + "&".join("%s=%s" % kv for kv in request.query.items()) if request.query else "")
        conn.request(request.method, target, body=request.body, headers=headers)
        reply = conn.getresponse()
        body = reply.read()
        conn.close()
        if action == "DescribeInstances" and reply.status == 200 and self.without_private_ip:
            body = self._strip_private_addresses(body)
        if action == "DescribeInstanceTypes" and reply.status == 200 and (region, action) in self.faults.gpu_fields_missing:
            body = _strip_gpu_fields(body)
        return Response(reply.status, body, reply.getheader("Content-Type") or "text/xml")

    def _strip_private_addresses(self, body):
        root = ET.fromstring(body)
        # moto's namespace, whichever spelling it uses, kept on the way out.
        namespace = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        ET.register_namespace("", namespace.strip("{}"))
        for item in root.iter(namespace + "item"):
            if item.findtext(namespace + "instanceId") in self.without_private_ip:
                for name in _PRIVATE_FIELDS:
                    for field in item.findall(namespace + name):
                        item.remove(field)
        return ET.tostring(root, encoding="utf-8", xml_declaration=True)

    def throttled(self, action, region):
        return _error(503, "RequestLimitExceeded", "Request limit exceeded.")

    def credentials_rejected(self, kind, request):
        # EC2's answers: an access key id it does not know, a secret that
        # does not sign as the key's.
        if kind == "unknown_key":
            return _error(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
        return _error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature "
                      "you provided. Check your AWS Secret Access Key and signing method.")

    def unavailable(self, action, region):
        return _error(503, "Unavailable", "The service is unavailable. Please try again shortly.")

    def hollow(self, action, region):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                "<requestId>%s</requestId></%sResponse>" % (action, request_id(), action))
        return Response(200, body.encode(), "text/xml;charset=UTF-8")


def _strip_gpu_fields(body):
    """Faults.gpu_fields_missing: every GPU of a type's GpuInfo without its
    name and count (its memory and manufacturer left), so GpuInfo is there
    and says nothing of the GPUs."""
    root = ET.fromstring(body)
    namespace = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    ET.register_namespace("", namespace.strip("{}"))
    for gpus in root.iter(namespace + "gpus"):
        for item in gpus.findall(namespace + "item"):
            for name in ("name", "count"):
                for field in item.findall(namespace + name):
                    item.remove(field)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _error(status, code, message):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code>'
            "<Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>"
            % (code, message, request_id()))
    return Response(status, body.encode(), "text/xml")


if __name__ == "__main__":
    sys.exit(main(AwsEmulator))
