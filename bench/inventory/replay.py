"""Record moto's EC2 answers once, then serve them back cheaply.

moto renders every DescribeInstances answer from its object model; for
10,000 instances that costs far more CPU than either inventory plugin, on
the same two cores. So each dataset is seeded into moto once, both plugins
list it once through a recording proxy, and the answers are kept in
.cache/bench/inventory/<dataset>.json.gz. The benchmark then runs against
``Replay``, which only looks answers up and waits the injected latency.

A request is keyed by its region (from the SigV4 scope) and its sorted
form parameters; a request that was never recorded is answered with an
error, so a benchmark can never quietly measure something else.
"""

from __future__ import annotations

import gzip
import json
from urllib.parse import parse_qsl, urlencode

from gpufleet.lab._cloud._server import Emulator, Response
from tests.emulators.aws import AwsEmulator


def request_key(region, request):
    params = sorted(parse_qsl(request.body.decode(), keep_blank_values=True))
    return "%s|%s" % (region, urlencode(params))


class Recorder(AwsEmulator):
    """The AWS emulator (moto), remembering every answer it gives."""

    def __init__(self, regions=None):
        super().__init__(regions)
        self.recorded = {}

    def answer(self, request, action, region):
        response = super().answer(request, action, region)
        if response.status != 200:
            raise RuntimeError("moto answered %s with HTTP %d: %s" % (action, response.status, response.body[:300]))
        self.recorded[request_key(region, request)] = [response.content_type, response.body.decode()]
        return response

    def save(self, path, meta):
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as handle:
            json.dump({"meta": meta, "responses": self.recorded}, handle)


class Replay(Emulator):
    """Serves a recording; ``faults.latency`` adds the per-call wait."""

    name = "aws-replay"
    route = AwsEmulator.route

    def __init__(self, path):
        super().__init__()
        with gzip.open(path, "rt") as handle:
            data = json.load(handle)
        self.meta = data["meta"]
        # Encoded once: a replayed answer costs a dict lookup and a write.
        self.responses = {k: (ctype, body.encode()) for k, (ctype, body) in data["responses"].items()}

    def answer(self, request, action, region):
        found = self.responses.get(request_key(region, request))
        if found is None:
            return Response(400, ("<Response><Errors><Error><Code>NotRecorded</Code><Message>%s in %s was not "
                                  "recorded</Message></Error></Errors></Response>" % (action, region)).encode(),
                            "text/xml")
        return Response(200, found[1], found[0])

    def throttled(self, action, region):
        raise NotImplementedError("the benchmark injects no throttling")

    def unavailable(self, action, region):
        raise NotImplementedError("the benchmark fails no region")
