# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: drift
type: aggregate
short_description: Record fleet drift, one entry per host and resource
description:
  - Used with a playbook run in check and diff mode, such as C(gpufleet drift).
    Every task that manages a resource yields one record per host (and per
    loop item) with a state - C(in-sync), C(drifted), C(failed),
    C(unreachable) or C(could-not-verify) - and, for drift, its diff.
  - Diffs of tasks under C(no_log) are replaced by a redaction marker; tasks
    with C(diff) set to false produce no diff.
  - Also records per-host metadata from the inventory (C(gpufleet_provider),
    C(gpufleet_region), C(gpufleet_gpu)), the OS release and the versions of the kernel, of
    key packages and of the driver and CUDA that P(gpufleet.cloud.gpu_facts#module)
    reports, for peer comparison.
  - Also records, as C(doctor), the node view of GPU faults that
    P(gpufleet.cloud.node_facts#module) reads (node_health's last report and the
    guard's repairs). It is not drift, so it adds no record and no exit bit.
  - A host whose run ended at a failure (one that no rescue or
    C(ignore_errors) caught) gets a C(could-not-verify) record with
    C(not_scanned) set for every resource task of the plays it belongs to
    that it never reached, so that coverage counts what should have been
    read, not only what was.
  - Writes one JSON document at the end of the run.
requirements:
  - enable in configuration, for example C(ANSIBLE_CALLBACKS_ENABLED=gpufleet.cloud.drift)
options:
  report_path:
    description: Where to write the JSON report.
    type: path
    default: ./drift.json
    env:
      - name: GPUFLEET_DRIFT_REPORT
    ini:
      - section: callback_drift
        key: report_path
  host_name:
    description:
      - The name the report gives the run's host, when the run has exactly one. A pull-mode run
        (P(gpufleet.cloud.pull#role)) sets it to the node's inventory name, under which its report
        merges with the rest of the fleet's, whatever inventory the run was given.
      - Empty keeps each host's own name, as does a run of more than one host.
    type: str
    default: ""
    env:
      - name: GPUFLEET_DRIFT_HOST
    ini:
      - section: callback_drift
        key: host_name
  packages:
    description: Packages whose installed versions are recorded for peer comparison.
    type: list
    elements: str
    default:
      - nvidia-driver
      - nvidia-kernel-dkms
      - nvidia-smi
      - libnvidia-ml1
      - cuda-toolkit
      - nvidia-cuda-toolkit
      - libnccl2
      - docker.io
      - docker-ce
      - containerd
      - prometheus-node-exporter
      - chrony
    env:
      - name: GPUFLEET_DRIFT_PACKAGES
    ini:
      - section: callback_drift
        key: packages
"""

import datetime
import json
import os

from ansible import context
from ansible.playbook.block import Block
from ansible.playbook.handler import Handler
from ansible.plugins.callback import CallbackBase

from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _drift


def _short(role):
    """A role's name without its collection (gpufleet.cloud.cuda: cuda)."""
    return str(role).rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet.cloud.drift"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None):
        super().__init__(display=display)
        self._records = {}
        self._hosts = {}
        self._started = datetime.datetime.now(datetime.timezone.utc)
        self._check_mode = bool(context.CLIARGS.get("check", False))
        self._variable_manager = None
        self._plays = []
        # (host, task name) of every task that reported on a host, recorded
        # or not: what a host whose run ended early never reached is the rest.
        self._seen = set()
        self._ended_at = {}
        self._first_failed = {}

    # -- helpers ---------------------------------------------------------
    def _host_meta(self, host):
        name = host.get_name()
        if name not in self._hosts:
            self._hosts[name] = _drift.host_meta(self._inventory_vars(host), [g.get_name() for g in host.get_groups()])
        return self._hosts[name]

    def _inventory_vars(self, host):
        """The host's inventory variables, group_vars included (host.vars
        alone misses variables set on groups)."""
        if self._variable_manager is not None:
            try:
                return self._variable_manager.get_vars(host=host)
            except Exception:  # pylint: disable=broad-except
                pass  # metadata is best effort; never break the run over it
        return host.vars or {}

    def _collect_versions(self, host, result):
        facts = result.get("ansible_facts") or {}
        versions = self._host_meta(host)["versions"]
        kernel = facts.get("ansible_kernel") or facts.get("kernel")
        if kernel:
            versions["kernel"] = str(kernel)
        distribution = facts.get("ansible_distribution") or facts.get("distribution")
        if distribution:
            # The release peers must share (Debian 12 and 13 differ by design).
            release = facts.get("ansible_distribution_major_version") or facts.get("distribution_major_version")
            self._host_meta(host)["os"] = "%s %s" % (distribution, release or "")
        # What the GPUs run, as gpu_facts reads it from nvidia-smi: the
        # packages say what is installed, this says what is loaded.
        gpu = facts.get("gpu")
        if isinstance(gpu, dict):
            for key, label in (("driver_version", "driver"), ("cuda_version", "CUDA (driver)"),
                               ("loaded_module_version", "nvidia module")):
                if gpu.get(key):
                    versions[label] = str(gpu[key])
        packages = facts.get("packages")
        if isinstance(packages, dict):
            for name in self.get_option("packages"):
                entries = packages.get(name)
                if entries:
                    versions[name] = str(entries[0].get("version"))
        # The node view of GPU faults (node_facts' doctor): what node_health
        # last found and what the guard's repair ladder is doing. Not drift:
        # no record and no exit bit comes of it.
        node = facts.get("gpufleet_node")
        if isinstance(node, dict) and isinstance(node.get("doctor"), dict):
            self._host_meta(host)["doctor"] = node["doctor"]

    def _needs_failed(self, task, host, role):
        """The roles that the task's role needs (site.yml's __site_needs on
        the role's block) and that already have a failed record on `host`."""
        get_vars = getattr(task, "get_vars", None)
        needs = (get_vars() if get_vars else {}).get("__site_needs") or []
        if not role or not isinstance(needs, list):
            return []
        failed = {_short(r["role"]) for r in self._records.values()
                  if r["host"] == host and r["state"] == _drift.FAILED and r.get("role")}
        return [str(n) for n in needs if n in failed and n != _short(role)]

    def _record(self, result, outcome, item=None):
        task = result._task
        host = result._host
        res = result._result
        self._host_meta(host)
        self._collect_versions(host, res)
        self._seen.add((host.get_name(), task.get_name()))
        if _drift.IGNORE_TAG in (task.tags or ()):
            return
        if isinstance(task, Handler):
            # A handler that would run is a consequence of drift already
            # recorded on the task that notified it, not a resource.
            return
        state = _drift.classify(task.action, res, outcome)
        if state is None:
            return
        no_log = bool(task.no_log)
        label = None
        if item is not None:
            label = "(censored)" if no_log else str(res.get("_ansible_item_label", item))
        resource = _drift.resource_id(task.get_name(), label)
        role = task._role.get_name() if getattr(task, "_role", None) else None
        record = {
            "host": host.get_name(),
            "resource": resource,
            "role": role,
            "action": task.action,
            "state": state,
        }
        applied_by = _applied_by(task._role) if role else []
        if applied_by and applied_by != [role]:
            # An internal role (_nvidia_packages) has no tag of its own in
            # site.yml: --fix reaches it through the roles that include it.
            record["applied_by"] = applied_by
        if state == _drift.DRIFTED:
            record["diff"] = _drift.redact_diff(res, no_log) or (None if no_log else _drift.unit_diff(res))
        elif state in (_drift.FAILED, _drift.UNREACHABLE, _drift.NOT_VERIFIED):
            record["message"] = "(censored)" if no_log else str(res.get("msg", ""))[:2000]
            needs_failed = self._needs_failed(task, record["host"], role) if state == _drift.FAILED else []
            if needs_failed:
                record["message"] += " (%s needs %s, which failed before it on this host)" % (
                    _short(role), ", ".join(needs_failed))
        # A handler or a repeated task name on the same host: keep the worst.
        key = (record["host"], resource)
        previous = self._records.get(key)
        if previous is None or _rank(state) > _rank(previous["state"]):
            self._records[key] = record

    # -- events ------------------------------------------------------------
    def v2_playbook_on_play_start(self, play):
        self._variable_manager = play.get_variable_manager()
        self._plays.append(play)

    def v2_runner_on_ok(self, result):
        if "results" not in result._result:  # looped tasks are recorded per item
            self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            host, name = result._host.get_name(), result._task.get_name()
            first = self._first_failed.setdefault(host, name)
            if not _rescued(result._task):
                # site.yml's last play fails a node whose role failed: what
                # its run never reached is that role's doing, not the gate's.
                self._ended_at[host] = first if _drift.IGNORE_TAG in (result._task.tags or ()) else name
        if "results" not in result._result:
            self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        if "results" not in result._result:
            self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_runner_item_on_ok(self, result):
        self._record(result, "ok", item=result._result.get("item"))

    def v2_runner_item_on_failed(self, result):
        self._record(result, "failed", item=result._result.get("item"))

    def v2_runner_item_on_skipped(self, result):
        self._record(result, "skipped", item=result._result.get("item"))

    def v2_playbook_on_stats(self, stats):
        self._not_scanned(stats)
        records = sorted(self._records.values(), key=lambda r: (r["host"], r["resource"]))
        for host in stats.processed:
            self._hosts.setdefault(host, {"provider": "unknown", "region": "unknown", "gpu_model": "none",
                                          "groups": [], "versions": {}})
        hosts = self._hosts
        alias = self.get_option("host_name")
        if alias and len(hosts) == 1:
            hosts = {alias: next(iter(hosts.values()))}
            records = [dict(record, host=alias) for record in records]
        report = {
            "version": _drift.SCHEMA_VERSION,
            "started": self._started.isoformat(),
            "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "check_mode": bool(self._check_mode),
            "hosts": hosts,
            "records": records,
            "exit_code": _drift.exit_code(records),
        }
        path = self.get_option("report_path")
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)  # readers never see half a report

    def _not_scanned(self, stats):
        """A could-not-verify record for each resource task that a host
        whose run ended at a failure never reached, in the plays it belongs
        to (a play for a group the host was never sorted into is not
        counted: which resources it holds is not known)."""
        failures = getattr(stats, "failures", {}) or {}
        ended = {h: t for h, t in self._ended_at.items() if failures.get(h)}
        if not ended:
            return
        only_tags = context.CLIARGS.get("tags") or ("all",)
        skip_tags = context.CLIARGS.get("skip_tags") or ()
        for play in self._plays:
            members = self._members(play)
            for task in _tasks(play.compile()):
                if (task.action in _drift.READ_ONLY_ACTIONS and task.action not in _drift.INCLUDE_ACTIONS) \
                        or _probe(task) or _drift.IGNORE_TAG in (task.tags or ()) \
                        or not task.evaluate_tags(only_tags, skip_tags, {}):
                    continue
                name = task.get_name()
                for host, at in ended.items():
                    if (members is not None and host not in members) or (host, name) in self._seen \
                            or (host, name) in self._records:
                        continue
                    role = task._role.get_name() if getattr(task, "_role", None) else None
                    self._records[(host, name)] = {
                        "host": host, "resource": name, "role": role, "action": task.action,
                        "state": _drift.NOT_VERIFIED, "not_scanned": True,
                        "message": "not scanned: this host's run ended when %r failed" % at,
                    }

    def _members(self, play):
        """The hosts a play's pattern names at the end of the run (after
        group_by), or None when that cannot be read: then every ended host
        counts."""
        try:
            inventory = self._variable_manager._inventory  # pylint: disable=protected-access
            return {h.get_name() for h in inventory.get_hosts(play.hosts, ignore_restrictions=True)}
        except Exception:  # pylint: disable=broad-except
            return None


def _tasks(blocks):
    """The tasks of blocks in play order: each block's tasks and its
    always section (a rescue runs only after a failure)."""
    for block in blocks:
        for part in (block.block, block.always):
            for item in part or ():
                if isinstance(item, Block):
                    yield from _tasks([item])
                else:
                    yield item


def _probe(task):
    """A command that reads (changed_when: false) owns no resource."""
    changed_when = task.changed_when
    values = changed_when if isinstance(changed_when, list) else [changed_when]
    return task.action in _drift.COMMAND_ACTIONS and values in ([False], ["false"], ["False"])


def _rescued(task):
    """Whether a block above the task has a rescue section, which catches
    its failure: the host's run goes on."""
    parent = getattr(task, "_parent", None)
    while parent is not None:
        if isinstance(parent, Block) and parent.rescue:
            return True
        parent = getattr(parent, "_parent", None)
    return False


def _applied_by(role, depth=0):
    """The roles a play applies that reach `role`: the role itself when no
    role includes it (or lists it as a dependency), otherwise the top of
    each chain of roles above it."""
    parents = list(role.get_parents() or []) if depth < 16 else []
    if not parents:
        return [role.get_name()]
    names = []
    for parent in parents:
        for name in _applied_by(parent, depth + 1):
            if name not in names:
                names.append(name)
    return names


def _rank(state):
    order = (_drift.IN_SYNC, _drift.NOT_VERIFIED, _drift.DRIFTED, _drift.FAILED, _drift.UNREACHABLE)
    return order.index(state)
