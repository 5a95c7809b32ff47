# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every cloud adapter shares, and the parallel walk over regions.

Private to gpufleet.cloud. An adapter (``_discovery_<cloud>.py``) knows one
cloud's SDK: how to make a client for a region, how to page through its
instances, which error codes mean "throttled", and how to turn one raw
instance into a record (``_gpu_record``). This module holds the rest, so
the inventory plugins and the gpu_instance_info module discover the same
way:

- ``discover`` queries regions in parallel with a bounded thread pool and
  keeps going when one region fails, reporting which one and why;
- errors that are the user's to fix (``ConfigError``, ``CredentialsError``,
  ``MissingLibraryError``) name the option to change.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_catalogue
from ansible_collections.gpufleet.cloud.plugins.module_utils._retry import RetryPolicy, ThrottledError, call_with_retry

DEFAULT_WORKERS = 16
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 4
# Messages from SDKs can be long (stack-like detail, recommendation URLs);
# a warning line stays readable.
MAX_ERROR_LENGTH = 400


class DiscoveryError(Exception):
    """Discovery cannot go on; the message says why."""


class ConfigError(DiscoveryError):
    """A configuration value is wrong. ``option`` is its name."""

    def __init__(self, option, message):
        super().__init__("option '%s': %s" % (option, message))
        self.option = option


class CredentialsError(DiscoveryError):
    """The SDK's credential chain found nothing usable, or the cloud
    rejected the credentials. The message names the options and environment
    variables to fix; ``detail`` is the SDK's own reason (one line, masked),
    which can be long: a caller shows it only when asked to be verbose."""

    def __init__(self, message, detail=None):
        super().__init__(message)
        self.detail = detail


class MissingLibraryError(DiscoveryError):
    """The cloud's SDK is not installed. ``library`` is its pip name."""

    def __init__(self, library, import_error):
        super().__init__("the Python library %s is required: %s" % (library, import_error))
        self.library = library
        self.import_error = import_error


class HollowReply(Exception):
    """A reply that looks successful but lacks the listing's own fields.
    It is an error for its region: read as an empty page it would make the
    region's hosts vanish without a word."""

    def __init__(self, action, fields):
        super().__init__("%s answered without %s: not a listing, so the region is not read as empty"
                         % (action, " or ".join(fields)))


class ListingError(Exception):
    """A page of a region's listing failed. The region then fails as a
    whole: the pages before it are dropped, because a partial listing shown
    as if complete would lose the later pages' hosts without a word."""

    def __init__(self, action, page, kept, error):
        super().__init__("%s page %d failed (%d instance(s) on the pages before it not listed either: "
                         "a partial listing is never shown as complete): %s" % (action, page, kept, error))
        self.action = action
        self.page = page


def require(value, action, *fields):
    """``value``, unless it is None: then the reply lacked ``fields``."""
    if value is None:
        raise HollowReply(action, fields)
    return value


class RegionFailure:
    """One region that could not be listed, and the reason. ``rejected`` is
    the CredentialsError when the cloud refused the credentials there."""

    __slots__ = ("region", "error", "rejected")

    def __init__(self, region, error, rejected=None):
        self.region = region
        self.error = error
        self.rejected = rejected

    def __repr__(self):
        return "RegionFailure(%r, %r)" % (self.region, self.error)


class RegionWarning:
    """Something the inventory must say about a region it did list: an
    instance type it could not look up, instances kept with unknown data.
    A ``strict`` one says the region's answer contradicts itself (a total
    count below the instances its pages held): with strict_regions it fails
    the region's listing as a region failure would."""

    __slots__ = ("region", "message", "strict")

    def __init__(self, region, message, strict=False):
        self.region = region
        self.message = message
        self.strict = strict

    def __repr__(self):
        return "RegionWarning(%r, %r)" % (self.region, self.message)


class Settings:
    """Everything an adapter needs from the user's configuration.

    ``credentials`` holds only what the user set explicitly; whatever is
    missing comes from the SDK's own chain (environment, profile file,
    instance role). ``endpoint`` may contain ``{region}``.
    """

    def __init__(self, endpoint=None, timeout=DEFAULT_TIMEOUT, retries=DEFAULT_RETRIES,
                 credentials=None, extra=None, policy=None, page_size=None):
        self.endpoint = endpoint or None
        # None: each API's own maximum. Smaller pages are for tests.
        self.page_size = page_size
        self.timeout = float(timeout)
        self.credentials = {k: v for k, v in (credentials or {}).items() if v not in (None, "")}
        self.extra = dict(extra or {})
        self.policy = policy or RetryPolicy(attempts=int(retries) + 1)


class Adapter:
    """Base of the four cloud adapters; see the module docstring."""

    provider = None
    #: Shape of a valid region name, and an example for error messages.
    region_pattern = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+$")
    region_example = None
    #: The SDK's pip name, and the ImportError its import raised (if any).
    library = None
    import_error = None
    #: For credential messages: the cloud's name, the key-pair options, the
    #: environment variables the SDK's chain reads for the same pair, and
    #: the chain's other sources.
    cloud_name = None
    key_options = ()
    key_env = ()
    other_sources = None
    #: Error codes with which the cloud refuses the credentials themselves
    #: (an unknown key, a bad signature, an invalid token); a refused
    #: permission is not one of them.
    auth_error_codes = frozenset()
    #: The API action ``pages`` calls, for error messages.
    list_action = None

    def __init__(self, settings):
        if self.import_error is not None:
            raise MissingLibraryError(self.library, self.import_error)
        self.settings = settings
        self._lock = threading.Lock()
        self.warnings = []
        # Secrets the SDK's chain found (environment, profile, role): masked
        # in messages like the configured ones.
        self.resolved_secrets = []

    # -- checks made before any network call ------------------------------
    def validate_regions(self, regions):
        """Raise ConfigError unless every name in ``regions`` looks like a region."""
        for region in regions:
            if not isinstance(region, str) or not self.region_pattern.match(region):
                raise ConfigError(
                    "regions",
                    "%r is not a valid %s region name (expected a name like %s)"
                    % (region, self.provider, self.region_example),
                )

    def check_credentials(self):
        """Resolve credentials once, before fanning out; raise CredentialsError."""
        raise NotImplementedError

    def missing_credentials(self, exc=None):
        """The CredentialsError for a chain that found nothing; ``exc`` is
        what the chain raised, kept as the error's detail."""
        return CredentialsError(
            "no %s credentials: set the %s options, or %s, or use %s"
            % (self.cloud_name, " and ".join(self.key_options), " and ".join(self.key_env), self.other_sources),
            detail=self.describe_error(exc) if exc is not None else None)

    def rejected_credentials(self, exc):
        """The CredentialsError for ``exc`` when it (or an error it wraps)
        is the cloud refusing the credentials; otherwise None."""
        refusal = self._refusal(exc)
        if refusal is None:
            return None
        reason = self.mask("%s: %s" % (self.error_code(refusal), self.error_message(refusal)))
        options = " and ".join(self.key_options)
        env = " and ".join(self.key_env)
        if self.settings.credentials.get(self.key_options[0]):
            message = ("%s rejected the credentials of the %s options (%s): correct them (while they are set, "
                       "%s are not read)" % (self.cloud_name, options, reason, env))
        else:
            message = ("%s rejected the credentials its SDK found (%s): correct %s, or %s, whichever holds them, "
                       "or set the %s options" % (self.cloud_name, reason, env, self.other_sources, options))
        return CredentialsError(message, detail=self.describe_error(exc))

    def _refusal(self, exc):
        """The exception in ``exc``'s chain that says "credentials refused".
        Followed through causes and contexts: a listing wraps the SDK's
        error, and some SDKs wrap their own (Huawei's project id lookup)."""
        seen = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            if self.is_rejected(exc):
                return exc
            exc = exc.__cause__ or exc.__context__
        return None

    def is_rejected(self, exc):
        """Whether ``exc`` itself is the cloud refusing the credentials."""
        return str(self.error_code(exc) or "") in self.auth_error_codes

    @staticmethod
    def error_code(exc):
        """The cloud's error code of an SDK exception, or None."""
        return getattr(exc, "error_code", None) or getattr(exc, "code", None)

    @staticmethod
    def error_message(exc):
        """The cloud's error message of an SDK exception."""
        return getattr(exc, "error_msg", None) or getattr(exc, "message", None) or str(exc)

    def region_failure(self, region, exc):
        """The RegionFailure for ``exc``; a refusal of the credentials says
        which options and variables to fix."""
        rejected = self.rejected_credentials(exc)
        return RegionFailure(region, str(rejected) if rejected else self.describe_error(exc), rejected)

    def key_pair(self, key_option, secret_option):
        """The explicitly set (key, secret), or (None, None) for the SDK's
        chain. Half a pair is a ConfigError naming the missing half."""
        key, secret = self.settings.credentials.get(key_option), self.settings.credentials.get(secret_option)
        if bool(key) != bool(secret):
            raise ConfigError(secret_option if key else key_option,
                              "%s and %s must be set together" % (key_option, secret_option))
        return key, secret

    # -- what each cloud provides -----------------------------------------
    def list_regions(self):
        """The regions this account can use, discovered through the API."""
        raise NotImplementedError

    def client(self, region):
        """An SDK client for ``region`` (endpoint, timeout, credentials set)."""
        raise NotImplementedError

    def pages(self, client, region):
        """The region's raw instances, one list per API page."""
        raise NotImplementedError

    def instance_type_of(self, raw):
        """The instance type (flavor) name of a raw instance, or None when
        the instance itself carries all the GPU data a record needs."""
        raise NotImplementedError

    def lookup_types(self, client, region, names):
        """{name: type info} for the instance types ``names``, from the API."""
        raise NotImplementedError

    def record(self, region, raw, type_info):
        """One raw instance as a record; ``type_info`` may be None."""
        raise NotImplementedError

    def is_throttled(self, exc):
        """Whether ``exc`` is this cloud's way of saying "slow down"."""
        raise NotImplementedError

    # -- shared flow ------------------------------------------------------
    def list_records(self, region):
        """Every instance of ``region`` as a record, page by page.

        Each page's instance types not seen before in this region are
        looked up before the page is normalised. The lookups are per region
        on purpose: what a region sells is the region's, and a region's
        calls then never depend on how fast the other regions were.
        """
        client = self.client(region)
        types = {}
        records = []
        for page in self._numbered_pages(client, region, records):
            wanted = {self.instance_type_of(raw) for raw in page} - set(types)
            wanted.discard(None)
            if wanted:
                found = self._lookup_types(client, region, sorted(wanted))
                # None marks "asked, unknown", so it is not asked again.
                types.update((name, found.get(name)) for name in wanted)
            page_records = [self.record(region, raw, types.get(self.instance_type_of(raw))) for raw in page]
            self._from_catalogue(region, page_records)
            unknown = sorted({r["instance_id"] for r in page_records if r["gpu_source"] == "unknown"})
            if unknown:
                self.warn(region, "no GPU data for %d instance(s) (%s): kept with GPU model and count unknown, "
                                  "in the group gpu_unknown" % (len(unknown), ", ".join(unknown)))
            unpriced = sorted({r["instance_id"] for r in page_records if r["charge_type"] == "unknown"})
            if unpriced:
                self.warn(region, "no known charge type for %d instance(s) (%s): their billing value is not one "
                                  "this plugin maps, so gpufleet_charge_type is unknown and gpufleet_spot false"
                          % (len(unpriced), ", ".join(unpriced)))
            records.extend(page_records)
        return records

    def _from_catalogue(self, region, records):
        """Give the records whose GPU data the API did not have the built-in
        catalogue's (_gpu_catalogue), marked ``gpu_source: catalogue``, and
        say which: the figures are the vendor's documented ones for the
        type, not what this instance reported."""
        filled = {}
        for record in records:
            if record["gpu_source"] != "unknown":
                continue
            gpu = _gpu_catalogue.lookup(self.provider, record["instance_type"])
            if gpu is not None:
                record["gpu"], record["gpu_source"] = gpu, "catalogue"
                filled.setdefault(record["instance_type"], []).append(record["instance_id"])
        for instance_type, ids in sorted(filled.items()):
            self.warn(region, "no GPU data from the API for %d instance(s) of type %s (%s): GPU data taken from "
                              "the built-in catalogue (gpu_source: catalogue)"
                      % (len(ids), instance_type, ", ".join(sorted(ids))))

    def _numbered_pages(self, client, region, records):
        """``pages``, with a failed page named: which action, which page,
        and how many instances the pages before it held."""
        pages = iter(self.pages(client, region))
        number = 0
        while True:
            number += 1
            try:
                page = next(pages)
            except StopIteration:
                return
            except Exception as exc:  # pylint: disable=broad-exception-caught
                # Broad: whatever the SDK raised fails the region; this only
                # adds where the listing was when it did.
                raise ListingError(self.list_action, number, len(records), self.describe_error(exc)) from exc
            yield page

    def _lookup_types(self, client, region, names):
        """``lookup_types``, made to lose no instance: a lookup that fails
        for one bad name (AWS answers InvalidInstanceType for a whole batch
        when one type is not offered in the region) is split in halves and
        asked again, down to the single names that fail, which stay out of
        the answer. A lookup throttled past its retries is not split: that
        would only ask more of an API that asks for less."""
        try:
            return self.lookup_types(client, region, names)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: whatever the SDK raises, the instances must be kept.
            if len(names) == 1 or isinstance(exc, ThrottledError) or self.is_throttled(exc):
                self.warn(region, "looking up instance types %s failed: %s" % (", ".join(names), self.describe_error(exc)))
                return {}
        half = len(names) // 2
        found = self._lookup_types(client, region, names[:half])
        found.update(self._lookup_types(client, region, names[half:]))
        return found

    def warn(self, region, message, strict=False):
        """Note something the inventory must say about ``region``."""
        with self._lock:
            self.warnings.append(RegionWarning(region, message, strict))

    def count_warning(self, region):
        """What a paging helper calls with a total count that was too low."""
        return lambda message: self.warn(region, message, strict=True)

    def call(self, function, *args, **kwargs):
        """One API call, retried with backoff while it is throttled."""
        return call_with_retry(lambda: function(*args, **kwargs), self.is_throttled, self.settings.policy)

    # -- helpers ----------------------------------------------------------
    def check_endpoint(self):
        """Raise ConfigError unless the endpoint is a URL or host name."""
        if self.settings.endpoint:
            self.endpoint_for("region")

    def endpoint_for(self, region):
        """The configured endpoint for ``region`` as scheme://host[:port], or None."""
        if not self.settings.endpoint:
            return None
        return "%s://%s" % split_endpoint(self.settings.endpoint.replace("{region}", region))

    def describe_error(self, exc):
        """One line about ``exc`` that is safe to print.

        SDK messages should never contain secrets, but a credential given
        explicitly is masked anyway, in case one ends up echoed in an error.
        """
        return "%s: %s" % (type(exc).__name__, self.mask(str(exc) or type(exc).__name__))

    def mask(self, text):
        """``text`` on one line, bounded, with every known secret masked."""
        text = " ".join(str(text).split())
        # Longest first: a secret that contains another is masked whole.
        for secret in sorted(self.secret_values(), key=len, reverse=True):
            text = text.replace(secret, "********")
        if len(text) > MAX_ERROR_LENGTH:
            text = text[:MAX_ERROR_LENGTH] + "..."
        return text

    def secret_values(self):
        """Credential values configured or found by the SDK (never printed)."""
        values = [v for k, v in self.settings.credentials.items() if k != "profile"] + list(self.resolved_secrets)
        return [v for v in values if isinstance(v, str) and len(v) > 3]


def split_endpoint(endpoint, default_scheme="https"):
    """(scheme, host[:port]) of an endpoint given as a URL or a bare host."""
    match = re.match(r"^(?:(https?)://)?([^/]+)/?$", endpoint or "")
    if not match:
        raise ConfigError("endpoint", "%r is not a URL like https://host[:port] or a host name" % (endpoint,))
    return match.group(1) or default_scheme, match.group(2)


class Result:
    """What ``discover`` found: ``records`` of the regions that answered,
    one ``RegionFailure`` per region that did not, the ``regions`` asked,
    and the ``warnings`` about regions that answered."""

    __slots__ = ("records", "failures", "regions", "warnings")

    def __init__(self, records, failures, regions, warnings=()):
        self.records = records
        self.failures = failures
        self.regions = regions
        self.warnings = list(warnings)

    @property
    def complete(self):
        return not self.failures


def discover(adapter, regions=None, workers=DEFAULT_WORKERS):
    """List every region's records in parallel; returns a Result.

    ``regions`` empty or None means every region the API reports. Records
    come sorted by region and instance id, so the output is stable.
    """
    if int(workers) < 1:
        raise ConfigError("workers", "must be at least 1, got %r" % (workers,))
    # Plain strings: region names from a config file arrive as tagged
    # (trusted, with their origin) string subclasses, which would follow
    # into every record, its cache entry and its host variables.
    regions = [str(r) if isinstance(r, str) else r for r in regions or ()]
    if regions:
        adapter.validate_regions(regions)
    adapter.check_endpoint()
    adapter.check_credentials()
    if not regions:
        try:
            regions = sorted(set(adapter.list_regions()))
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Broad: without a region list there is nothing to fall back to.
            rejected = adapter.rejected_credentials(exc)
            if rejected:
                raise rejected from exc
            raise DiscoveryError("could not discover the regions: %s" % adapter.describe_error(exc)) from exc

    records = []
    failures = []
    if regions:
        # One thread per region up to the bound: the calls wait on the
        # network, so threads overlap the latency; the bound keeps a large
        # account from opening a connection per region all at once.
        with ThreadPoolExecutor(max_workers=min(int(workers), len(regions))) as pool:
            futures = [(region, pool.submit(adapter.list_records, region)) for region in regions]
            for region, future in futures:
                try:
                    records.extend(future.result())
                except Exception as exc:  # pylint: disable=broad-exception-caught
                    # Broad: a region's failure, whatever its kind, must not
                    # take the other regions' hosts down with it.
                    failures.append(adapter.region_failure(region, exc))
    if failures and len(failures) == len(regions) and all(f.rejected for f in failures):
        # Refused everywhere: the credentials are wrong, not the regions;
        # one message says so, instead of the same one for every region.
        raise failures[0].rejected
    records.sort(key=lambda r: (r["region"], r["instance_id"]))
    warnings = sorted(adapter.warnings, key=lambda w: w.region)
    return Result(records, failures, regions, warnings)
