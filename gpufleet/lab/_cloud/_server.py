"""What the cloud emulators share: a loopback HTTP server, seeding, a call
log and fault injection (throttling, a failed region, latency).

An emulator subclass says how its cloud's requests name the action and the
region, and how its answers and errors look; this module does the rest.
Every emulator binds 127.0.0.1 on an ephemeral port, so tests never send
traffic off the machine and several emulators run side by side.

Seed format (the same for every emulator; JSON or YAML):

    regions: [cn-hangzhou, cn-beijing]      # regions the API reports
    instances:
      - region: cn-hangzhou                  # required
        instance_type: ecs.gn7i-c8g1.2xlarge # required; from the emulator's CATALOG
        instance_id: i-lab1                  # default: generated
        zone: cn-hangzhou-h                  # default: <region>-a
        name: lab-node-1
        state: running                       # a normalised state (see _gpu_record.STATES)
        private_ip: 127.0.0.11               # null: the instance has none
        public_ip: null
        charge: on_demand                    # on_demand | subscription | spot
        tags: {role: gpu}

``regions`` may be left out: the regions of the instances are used.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

LOOPBACK = "127.0.0.1"


class Request:
    """One HTTP request as an emulator sees it."""

    def __init__(self, method, path, query, headers, body):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body or b"{}")

    def form(self):
        """Query string and urlencoded body together, one value per key."""
        params = dict(self.query)
        if self.body and "json" not in (self.headers.get("Content-Type") or ""):
            params.update({k: v[-1] for k, v in parse_qs(self.body.decode(), keep_blank_values=True).items()})
        return params


class Response:
    def __init__(self, status, body, content_type="application/json", headers=None):
        self.status = status
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.content_type = content_type
        self.headers = headers or {}


class Faults:
    """Injected faults. Thread-safe: requests arrive on many threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.latency = 0.0
        self.region_latency = {}
        self.failed_regions = set()
        # region -> instance types its type lookup refuses, the way a real
        # API answers for a type not offered in that region.
        self.unoffered_types = {}
        # (region, action) pairs answered with a success that lacks the
        # listing's own fields (HTTP 200, a request id, nothing else).
        self.hollow = set()
        # (region, action) pairs whose answers carry the instances' or
        # types' GPU fields missing or null (the rest of the reply intact),
        # as an API can send them for a type it has no GPU data on.
        self.gpu_fields_missing = set()
        # (region, action) -> the page (1-based count of that action's
        # calls in that region) answered with the region-down error, so a
        # listing fails part-way through.
        self.failing_pages = {}
        # Regions whose requests get no answer until ``release`` is set
        # (stop() sets it): a region that hangs, for timeout tests that wait
        # on a condition instead of a fixed latency.
        self.hung_regions = set()
        # region -> what to add to the total count a counted listing
        # reports (Tencent's TotalCount, Huawei's count): a count that lies
        # low (negative) or high, while the pages hold every instance.
        self.total_skew = {}
        self.release = threading.Event()
        # None, or how every request's credentials are refused, whatever
        # the region: "unknown_key" (the key id does not exist) or
        # "bad_signature" (the key exists, the secret does not match). Each
        # emulator answers with its cloud's own auth-failure error.
        self.rejected_credentials = None
        self._throttle = {}
        self._page_calls = {}

    def throttle(self, count, region=None, action=None):
        """Answer the next ``count`` matching requests with a throttling error."""
        with self._lock:
            self._throttle[(region, action)] = self._throttle.get((region, action), 0) + count

    def take_throttle(self, region, action):
        with self._lock:
            for key in ((region, action), (region, None), (None, action), (None, None)):
                if self._throttle.get(key):
                    self._throttle[key] -= 1
                    return True
        return False

    def fail_page(self, region, action, page):
        """Fail the ``page``-th call of ``action`` in ``region`` from now on
        (calls made before do not count), or none with ``page`` None."""
        with self._lock:
            self._page_calls.pop((region, action), None)
            if page is None:
                self.failing_pages.pop((region, action), None)
            else:
                self.failing_pages[(region, action)] = page

    def fails_page(self, region, action):
        """Count this call of ``action`` in ``region``; whether it is the page to fail."""
        with self._lock:
            key = (region, action)
            self._page_calls[key] = self._page_calls.get(key, 0) + 1
            return self.failing_pages.get(key) == self._page_calls[key]

    def delay(self, region):
        return self.region_latency.get(region, self.latency)


class Emulator:
    """Base of the loopback cloud emulators; see the module docstring."""

    name = "emulator"
    #: instance type -> GPU facts; each cloud's emulator fills it in.
    CATALOG = {}

    def __init__(self, regions=None):
        self.regions = list(regions or ())
        self.instances = {}
        self.faults = Faults()
        self.calls = []
        # Each stop an emulated stop call made (stop_instance): what a
        # test counts to prove an instance was stopped exactly once.
        self.stops = []
        # Each reboot an emulated reboot call made (reboot_instance), and
        # what a lab does to the instance's node then (on_reboot(inst):
        # restart its container), after the call has answered.
        self.reboots = []
        self.on_reboot = None
        self._server = None
        self._thread = None
        self._lock = threading.Lock()

    # -- data -------------------------------------------------------------
    def seed(self, instances, regions=None):
        """Add instances (the seed format above); returns them completed."""
        added = []
        for index, spec in enumerate(instances):
            inst = self.complete(dict(spec), index)
            with self._lock:
                self.instances.setdefault(inst["region"], []).append(inst)
                if inst["region"] not in self.regions:
                    self.regions.append(inst["region"])
            added.append(inst)
        for region in regions or ():
            if region not in self.regions:
                self.regions.append(region)
        return added

    def seed_file(self, path):
        data = yaml.safe_load(Path(path).read_text()) or {}
        return self.seed(data.get("instances") or [], data.get("regions"))

    def complete(self, spec, index):
        """Fill the seed defaults in; an unknown instance type is an error."""
        for key in ("region", "instance_type"):
            if not spec.get(key):
                raise ValueError("seed instance %d has no %s" % (index, key))
        if not self.known_type(spec["instance_type"]):
            raise ValueError("seed instance %d: %s does not know the instance type %r (known: %s)"
                             % (index, self.name, spec["instance_type"], ", ".join(sorted(self.CATALOG))))
        spec.setdefault("instance_id", self.new_instance_id())
        spec.setdefault("zone", self.default_zone(spec["region"]))
        spec.setdefault("name", spec["instance_id"])
        spec.setdefault("state", "running")
        spec.setdefault("private_ip", "10.%d.%d.%d" % (index // 65536 % 256, index // 256 % 256, index % 256))
        spec.setdefault("public_ip", None)
        spec.setdefault("charge", "on_demand")
        spec.setdefault("tags", {})
        return spec

    def new_instance_id(self):
        return "i-" + uuid.uuid4().hex[:20]

    def find(self, instance_id):
        """The seeded instance with this id, in any region, or None."""
        with self._lock:
            return next((inst for insts in self.instances.values() for inst in insts
                         if inst["instance_id"] == instance_id), None)

    def stop_instance(self, inst, **detail):
        """Stop a running instance as the cloud's stop call does, and record
        the stop (``stops``, with the call's own parameters in ``detail``).
        It goes straight to stopped: no emulated call sees it stopping."""
        with self._lock:
            inst["state"] = "stopped"
            self.stops.append(dict(detail, instance_id=inst["instance_id"]))

    def reboot_instance(self, inst, **detail):
        """Reboot a running instance as the cloud's reboot call does, and
        record it (``reboots``). The instance stays running as the cloud
        lists it; a lab's ``on_reboot`` restarts its node a second after
        the call has answered."""
        with self._lock:
            self.reboots.append(dict(detail, instance_id=inst["instance_id"]))
        if self.on_reboot is not None:
            # As a cloud does: the call answers, then the instance goes down.
            threading.Timer(1.0, self.on_reboot, args=(inst,)).start()

    def schedule_event(self, inst, event):
        """Give the instance one scheduled event, written as the cloud's
        event API lists it (each emulator's events call filters and pages
        them); returns it."""
        with self._lock:
            inst.setdefault("events", []).append(event)
        return event

    def events_of(self, instance_ids):
        """The events of the instances with these ids, in seed order."""
        with self._lock:
            return [event for insts in self.instances.values() for inst in insts
                    if inst["instance_id"] in instance_ids for event in inst.get("events", ())]

    def known_type(self, name):
        return name in self.CATALOG

    def default_zone(self, region):
        return region + "-a"

    # -- what a cloud emulator provides -----------------------------------
    def route(self, request):
        """(action, region) of a request."""
        raise NotImplementedError

    def answer(self, request, action, region):
        """The Response to a request that no fault intercepted."""
        raise NotImplementedError

    def throttled(self, action, region):
        """This cloud's throttling error."""
        raise NotImplementedError

    def unavailable(self, action, region):
        """This cloud's error for a region that is down."""
        raise NotImplementedError

    def credentials_rejected(self, kind, request):
        """This cloud's error for credentials it does not accept; ``kind`` is
        "unknown_key" or "bad_signature" (see Faults.rejected_credentials)."""
        raise NotImplementedError

    def hollow(self, action, region):
        """A 200 reply with this cloud's envelope and none of the action's
        fields: what an API gateway or a proxy can hand back."""
        raise NotImplementedError

    # -- dispatch ---------------------------------------------------------
    def dispatch(self, request):
        action, region = self.route(request)
        self.calls.append({"action": action, "region": region})
        if self.faults.rejected_credentials:
            # A cloud checks the signature before anything else.
            return self.credentials_rejected(self.faults.rejected_credentials, request)
        delay = self.faults.delay(region)
        if delay:
            time.sleep(delay)
        if region in self.faults.hung_regions:
            self.faults.release.wait()
        if region in self.faults.failed_regions:
            return self.unavailable(action, region)
        if self.faults.take_throttle(region, action):
            return self.throttled(action, region)
        if self.faults.fails_page(region, action):
            return self.unavailable(action, region)
        if (region, action) in self.faults.hollow:
            return self.hollow(action, region)
        return self.answer(request, action, region)

    def count(self, action=None, region=None):
        """How many requests matched ``action`` and ``region`` (None: any)."""
        return sum(1 for c in self.calls
                   if (action is None or c["action"] == action) and (region is None or c["region"] == region))

    # -- server -----------------------------------------------------------
    def start(self, port=0):
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                request = Request(self.command, url.path, query, self.headers, body)
                try:
                    response = emulator.dispatch(request)
                except Exception as exc:  # pylint: disable=broad-exception-caught
                    # An emulator bug must show up as a failed call with the
                    # reason, not as a hung or reset connection.
                    response = Response(500, {"emulator_error": "%s: %s" % (type(exc).__name__, exc)})
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(response.body)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format, *args):  # pylint: disable=redefined-builtin
                # Quiet: a test's output is for the test.
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, port), Handler)
        self._server.daemon_threads = True
        # A short poll interval makes stop() quick; tests start and stop many.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.name, daemon=True)
        self._thread.start()
        return self

    @property
    def port(self):
        return self._server.server_address[1]

    @property
    def url(self):
        return "http://%s:%d" % (LOOPBACK, self.port)

    def stop(self):
        # Hung requests answer now, so their threads end with the server.
        self.faults.release.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.stop()


def request_id():
    return str(uuid.uuid4()).upper()


def main(emulator_class, argv=None):
    """Run an emulator as a process: ``python -m <its module> ...``
    (gpufleet.lab._cloud.aliyun, tests.emulators.tencent ...)."""
    # Usage names the module that was run with -m, the command a user can
    # type (run as a script, the emulator's class is defined in __main__).
    module = emulator_class.__module__
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec else emulator_class.name
    parser = argparse.ArgumentParser(prog="python -m " + module,
                                     description="Loopback %s emulator for gpufleet's lab and tests." % emulator_class.name)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--seed", help="seed file (JSON or YAML, format in gpufleet/lab/_cloud/_server.py)")
    parser.add_argument("--port-file", help="write the port here once listening")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--throttle", type=int, default=0, help="throttle this many requests first")
    parser.add_argument("--fail-region", action="append", default=[], help="answer this region with errors")
    args = parser.parse_args(argv)

    emulator = emulator_class()
    if args.seed:
        emulator.seed_file(args.seed)
    emulator.faults.latency = args.latency
    emulator.faults.failed_regions.update(args.fail_region)
    if args.throttle:
        emulator.faults.throttle(args.throttle)
    # Block SIGTERM and SIGINT before any thread starts, so every thread
    # inherits the mask and the main thread alone takes them in sigwait().
    # With a Python handler instead, a signal the kernel hands to a request
    # thread never wakes a main thread blocked in a lock, and the process
    # lived on until `gpufleet lab down` killed it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    emulator.start(args.port)
    if args.port_file:
        Path(args.port_file).write_text("%d\n" % emulator.port)
    print("%s emulator listening on %s" % (emulator_class.name, emulator.url), flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit("run a cloud's module instead, e.g. python -m gpufleet.lab._cloud.aliyun")
