# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller-side base of the four GPU inventory plugins.

Private to gpufleet.cloud. A plugin (plugins/inventory/<cloud>.py) brings
its documentation, the names of its credential options and its adapter;
this base does the rest:

- checks the configuration and names the option that is wrong (including
  options that do not exist, which Ansible itself ignores);
- serves a cache hit without a single API call, and otherwise runs the
  shared discovery (regions in parallel, see module_utils/_discovery.py);
- reports failed regions as warnings, or fails with ``strict_regions``;
- turns records into hosts: ``gpufleet_*`` variables marked unsafe, the
  fixed groups, hostnames from a preference list, then the standard
  constructed options (compose, groups, keyed_groups, strict).
"""

from __future__ import annotations

import difflib
import re

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.group import to_safe_group_name
from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.parsing.convert_bool import BOOLEANS
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.module_utils._discovery import (
    ConfigError,
    CredentialsError,
    DiscoveryError,
    MissingLibraryError,
    Settings,
    discover,
)

display = Display()

# Record fields a hostname can come from (the scalar ones).
HOSTNAME_FIELDS = ("private_ip", "public_ip", "instance_id", "name")
_GROUP_UNSAFE = re.compile(r"[^a-z0-9_]")
# Ansible's own refusal of an option's type, which names the plugin's
# module path and where the value came from; said in the plugins' words.
_ANSIBLE_TYPE_ERROR = re.compile(
    r"^Config '(?P<option>[^']+)' .* has an invalid value: Invalid value provided for '(?P<type>[^']+)': (?P<value>.*)$",
    re.S)
_TYPE_WORDS = {"int": "an integer", "float": "a number", "list": "a list", "dict": "a mapping", "str": "a string"}


class OneLineError(AnsibleParserError):
    """An error that is its message and nothing else: every error these
    plugins raise is one (``parse`` turns Ansible's own into one too).

    ansible-core 2.19 prints an inventory plugin's error twice: in the
    warning's summary line and again below it, with the source it was
    parsing, because the source makes the error's details differ from the
    warning's. An error without that source folds into the summary line, so
    the message is printed once; the source is still named by ansible's own
    "failed to parse inventory source" line. Raised ``from None``: a chained
    cause is printed as well, which for the SDKs' errors is the whole
    provider chain's story. The property is ansible's own (private) one:
    tests/integration/inventory/test_inventory_errors.py fails if a
    later ansible-core prints the message twice again.
    """

    @property
    def _formatted_source_context(self):
        return None


def group_name(prefix, value):
    """A fixed group name: lower case, anything but [a-z0-9_] becomes _."""
    return prefix + _GROUP_UNSAFE.sub("_", str(value).lower())


class GpuInventoryBase(BaseInventoryPlugin, Constructable, Cacheable):
    """Base class; a plugin sets NAME, CREDENTIAL_OPTIONS and adapter_class()."""

    NAME = None
    #: This plugin's credential options, passed to the adapter by name.
    CREDENTIAL_OPTIONS = ()
    #: Other plugin-specific options the adapter reads (Settings.extra).
    EXTRA_OPTIONS = ()
    BOOL_OPTIONS = ("strict_regions", "gpu_only", "gpu_unknown", "strict", "cache", "use_extra_vars", "leading_separator")

    def adapter_class(self):
        """The module_utils adapter class. Imported on demand, so a cache
        hit never even loads the cloud's SDK."""
        raise NotImplementedError

    # -- Ansible's entry points -------------------------------------------
    def verify_file(self, path):
        short = self.NAME.rsplit(".", 1)[-1]
        return super().verify_file(path) and path.endswith((short + ".yml", short + ".yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        try:
            self._parse(path, cache)
        except OneLineError:
            raise
        except AnsibleError as exc:
            # Ansible's own errors: an option of the wrong type, a
            # constructed expression that fails under strict.
            message = exc.message
            wrong_type = _ANSIBLE_TYPE_ERROR.match(message)
            if wrong_type:
                message = "option '%s': expected %s, got %s" % (
                    wrong_type["option"], _TYPE_WORDS.get(wrong_type["type"], wrong_type["type"]), wrong_type["value"])
            if not message.startswith(self.NAME):
                message = "%s: %s" % (self.NAME, message)
            raise OneLineError(message) from None

    def _parse(self, path, cache):
        config = self._read_config_data(path)
        self._reject_unknown_options(config)
        hostnames = self._hostname_preferences()
        try:
            states, tags = gr.check_filters(self.get_option("filters"))
        except ValueError as exc:
            raise OneLineError("%s: option 'filters': %s" % (self.NAME, exc)) from None
        for option, minimum in (("workers", 1), ("retries", 0), ("timeout", 0.001)):
            if self.get_option(option) < minimum:
                raise OneLineError("%s: option '%s': must be at least %s, got %s"
                                   % (self.NAME, option, minimum, self.get_option(option)))

        records = self._cached_records(path, cache)
        self._populate(records, hostnames, states, tags)

    # -- configuration checks ---------------------------------------------
    def _reject_unknown_options(self, config):
        known = set(self._options) | {"plugin"}
        for key, value in config.items():
            if key not in known:
                close = difflib.get_close_matches(str(key), sorted(known), n=1)
                hint = " (did you mean '%s'?)" % close[0] if close else ""
                raise OneLineError("%s: unknown option '%s'%s" % (self.NAME, key, hint))
            # Ansible reads any unrecognised value of a bool option as
            # false; "strict_regions: maybe" must not quietly mean "no".
            if key in self.BOOL_OPTIONS and not (isinstance(value, bool) or str(value).lower() in BOOLEANS):
                raise OneLineError("%s: option '%s': expected true or false, got %r" % (self.NAME, key, value))

    def _hostname_preferences(self):
        preferences = self.get_option("hostnames") or []
        for entry in preferences:
            if not isinstance(entry, str) or not (entry in HOSTNAME_FIELDS or (entry.startswith("tag:") and len(entry) > 4)):
                raise OneLineError(
                    "%s: option 'hostnames': %r is neither a record field (%s) nor tag:KEY"
                    % (self.NAME, entry, ", ".join(HOSTNAME_FIELDS)))
        if not preferences:
            raise OneLineError("%s: option 'hostnames': needs at least one entry" % self.NAME)
        return preferences

    def _settings(self):
        return Settings(
            endpoint=self.get_option("endpoint"),
            timeout=self.get_option("timeout"),
            retries=self.get_option("retries"),
            credentials={name: self.get_option(name) for name in self.CREDENTIAL_OPTIONS},
            extra={name: self.get_option(name) for name in self.EXTRA_OPTIONS},
        )

    # -- records ----------------------------------------------------------
    def _cached_records(self, path, cache):
        key = self.get_cache_key(path)
        caching = self.get_option("cache")
        if caching and cache:
            try:
                return self._cache[key]
            except KeyError:
                pass
        records, complete = self._discover()
        # A partial result is shown but never cached: the next run must try
        # the failed regions again instead of serving their absence.
        if caching and complete:
            self._cache[key] = records
        return records

    def _discover(self):
        """(fresh records, whether every region answered)."""
        try:
            result = discover(self.adapter_class()(self._settings()), self.get_option("regions"),
                              self.get_option("workers"))
        except ConfigError as exc:
            raise OneLineError("%s: %s" % (self.NAME, exc)) from None
        except MissingLibraryError as exc:
            raise OneLineError("%s: %s (%s)" % (self.NAME, missing_required_lib(exc.library), exc.import_error)) from None
        except CredentialsError as exc:
            if exc.detail:
                display.vvv("%s: %s" % (self.NAME, exc.detail))
            raise OneLineError("%s: %s" % (self.NAME, exc)) from None
        except DiscoveryError as exc:
            raise OneLineError("%s: %s" % (self.NAME, exc)) from None

        for warning in result.warnings:
            message = "%s: region %s: %s" % (self.NAME, warning.region, warning.message)
            if warning.strict and self.get_option("strict_regions"):
                raise OneLineError(message + " (strict_regions is on)")
            display.warning(message)
        for failure in result.failures:
            message = "%s: region %s failed: %s" % (self.NAME, failure.region, failure.error)
            if self.get_option("strict_regions"):
                raise OneLineError(message + " (strict_regions is on)")
            display.warning(message + "; its hosts are not in this inventory")
        if result.failures and len(result.failures) == len(result.regions):
            raise OneLineError("%s: every region failed (%s)" % (self.NAME, ", ".join(f.region for f in result.failures)))
        return result.records, result.complete

    # -- hosts and groups -------------------------------------------------
    def _populate(self, records, hostnames, states, tags):
        gpu_only = self.get_option("gpu_only")
        keep_unknown = self.get_option("gpu_unknown")
        strict = self.get_option("strict")
        compose = self.get_option("compose")
        groups = self.get_option("groups")
        keyed_groups = self.get_option("keyed_groups")
        # Names other sources of the same inventory already use count as
        # taken: two clouds' VPCs can both have a 10.0.0.5, and Ansible
        # would merge them into one host.
        taken = set(self.inventory.hosts)
        for record in records:
            if not gr.matches(record, states, tags, gpu_only, keep_unknown):
                if gpu_only and not keep_unknown and gr.gpu_unknown(record):
                    display.warning("%s: instance %s in %s is left out: its GPU data is unknown and gpu_unknown "
                                    "is false" % (self.NAME, record["instance_id"], record["region"]))
                continue
            host = self._hostname(record, hostnames, taken)
            if host is None:
                display.warning("%s: instance %s in %s has no hostname from %s that another host does not "
                                "already use; it is left out" % (self.NAME, record["instance_id"], record["region"],
                                                                 ", ".join(hostnames)))
                continue
            taken.add(host)
            self.inventory.add_host(host)
            hostvars = {"gpufleet_" + key: value for key, value in self._unsafe(record).items()}
            for key, value in hostvars.items():
                self.inventory.set_variable(host, key, value)
            for group in self._fixed_groups(record):
                self.inventory.add_group(group)
                self.inventory.add_child(group, host)
            self._set_composite_vars(compose, hostvars, host, strict=strict)
            self._add_host_to_composed_groups(groups, hostvars, host, strict=strict)
            self._add_host_to_keyed_groups(keyed_groups, hostvars, host, strict=strict)
            if not record["private_ip"]:
                self._warn_no_private_ip(record, host)

    def _warn_no_private_ip(self, record, host):
        """An instance without a private address stays a host, named by the
        next O(hostnames) entry; say what Ansible will connect to, since an
        instance id or a name is rarely an address that resolves."""
        address = self.inventory.get_host(host).vars.get("ansible_host")
        if address:
            reach = "ansible_host is %s (from compose)" % address
        elif host == record["public_ip"]:
            reach = "it is named by its public IP, which Ansible connects to"
        else:
            reach = ("it has no address to connect to (public IP: %s); compose ansible_host, e.g. "
                     "ansible_host: gpufleet_public_ip, to reach it" % (record["public_ip"] or "none"))
        display.warning("%s: instance %s in %s has no private IP address: it is kept as host %s, and %s"
                        % (self.NAME, record["instance_id"], record["region"], host, reach))

    @staticmethod
    def _sanitize_group_name(name):
        """Groups from O(keyed_groups) and O(groups) always get valid names:
        tags with spaces, dots or colons would otherwise make group names
        Ansible only warns about (TRANSFORM_INVALID_GROUP_CHARS defaults to
        never). Invalid characters become _; letters of any script stay."""
        return to_safe_group_name(name, force=True, silent=True)

    def _unsafe(self, record):
        """The record with every string marked unsafe: API data (a tag value,
        say) must never be templated.

        ansible-core 2.19 and later do this themselves for every variable an
        untrusted plugin sets (trusted_by_default false); wrapping first
        would only do the same work twice. Older cores need wrap_var.
        """
        if getattr(self, "trusted_by_default", None) is False:
            return record
        return wrap_var(record)

    @staticmethod
    def _hostname(record, preferences, taken):
        for preference in preferences:
            if preference.startswith("tag:"):
                value = record["tags"].get(preference[4:])
            else:
                value = record.get(preference)
            if value and value not in taken:
                return value
        return None

    @staticmethod
    def _fixed_groups(record):
        groups = [group_name("cloud_", record["provider"]), group_name("region_", record["region"])]
        if record["gpu"]["model"]:
            groups.append(group_name("gpu_", record["gpu"]["model"]))
        if gr.is_share(record["gpu"]["count"]):
            groups.append("gpu_share")
        if gr.gpu_unknown(record):
            groups.append("gpu_unknown")
        if record["spot"]:
            groups.append("spot")
        return groups
