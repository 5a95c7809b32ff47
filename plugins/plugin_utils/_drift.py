# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift record model and its classification: one record per host x
resource from a check-mode run.

The one definition of the record states, the exit bitmask and the report's
schema version: the callback writes reports with it, and the gpufleet CLI
reads them back with it (gpufleet/drift/_schema.py imports this module), so
the two cannot disagree. Kept apart from the callback so the rules can be
unit tested without running a playbook. Controller-only.
"""

from __future__ import annotations

IN_SYNC = "in-sync"
DRIFTED = "drifted"
FAILED = "failed"
UNREACHABLE = "unreachable"
NOT_VERIFIED = "could-not-verify"
STATES = (IN_SYNC, DRIFTED, FAILED, UNREACHABLE, NOT_VERIFIED)

# The exit bitmask: one run can report drift, failures and unreachable
# hosts at once (1 is left to the CLI for "could not run as asked").
EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE = 0, 2, 4, 8

# The version of the report the callback writes. A reader refuses any other
# (check_report): a renamed field must never read as "no drift".
SCHEMA_VERSION = 1

REDACTED = "<redacted: no_log>"
# Tasks with this tag (cache refreshes, probes) are never recorded.
IGNORE_TAG = "gpufleet_drift_ignore"


def _builtin(*names):
    """Each action name as a task may spell it: short, builtin or legacy."""
    return frozenset(a for name in names for a in (name, "ansible.builtin." + name, "ansible.legacy." + name))


# Includes own no resource, but hide the tasks they include until they run.
INCLUDE_ACTIONS = _builtin("include_tasks", "include_role")

# Actions that read, decide or include, but own no resource on the node:
# their outcome is not a statement about drift.
READ_ONLY_ACTIONS = INCLUDE_ACTIONS | _builtin(
    "assert", "debug", "fail", "set_fact", "set_stats", "meta", "pause", "validate_argument_spec",
    "import_tasks", "import_role", "include_vars", "add_host", "group_by",
    "setup", "gather_facts", "package_facts", "service_facts", "stat", "find", "slurp", "wait_for",
    "wait_for_connection", "getent", "ping",
) | frozenset(("gpufleet.cloud.gpu_facts", "gpu_facts", "gpufleet.cloud.preflight", "preflight",
              "gpufleet.cloud.node_facts", "node_facts"))

# Actions that cannot be checked without running them.
COMMAND_ACTIONS = _builtin("command", "shell", "raw", "script")


def resource_id(task_name, item_label=None):
    """A stable identifier: the task's name (role-qualified by Ansible), plus
    the loop item's label for looped tasks."""
    rid = task_name.strip()
    if item_label is not None and item_label != "":
        rid = "%s [%s]" % (rid, item_label)
    return rid


def _mentions_check_mode(result):
    cond = result.get("false_condition") or ""
    return "ansible_check_mode" in str(cond)


def classify(action, result, outcome):
    """The drift state of one task result, or None when it says nothing about
    a resource.

    outcome is what Ansible reported: 'ok', 'failed', 'skipped' or
    'unreachable'. result is the module's result dictionary.
    """
    if outcome == "unreachable":
        return UNREACHABLE
    if action in READ_ONLY_ACTIONS:
        # A read that fails still means the host could not be verified.
        return FAILED if outcome == "failed" else None
    if outcome == "failed":
        return FAILED
    if outcome == "skipped":
        msg = str(result.get("msg", ""))
        if _mentions_check_mode(result):
            # Skipped *because* this is check mode: its resource was not looked at.
            return NOT_VERIFIED
        if result.get("false_condition") is not None:
            # A `when:` that does not apply to this host (for a command too:
            # its condition, read from the node, said there is nothing to do).
            return None
        if action in COMMAND_ACTIONS or "check mode" in msg.lower():
            # The module itself declined to look in check mode ("does not
            # support check mode", or its own reason it cannot, such as
            # gpufleet.cloud.nft_table without CAP_SYS_ADMIN).
            return NOT_VERIFIED
        return None
    if action in COMMAND_ACTIONS and not result.get("changed"):
        # A command that ran in check mode (check_mode: false) and reported
        # no change is a probe, not a managed resource.
        return None
    return DRIFTED if result.get("changed") else IN_SYNC


def redact_diff(result, no_log):
    """The diff to keep for a result: nothing for no_log tasks, otherwise the
    before/after text of each diff entry."""
    if no_log or result.get("_ansible_no_log") or result.get("censored"):
        return REDACTED if result.get("changed") else None
    diffs = result.get("diff")
    if not diffs:
        return None
    if isinstance(diffs, dict):
        diffs = [diffs]
    out = []
    for d in diffs:
        if not isinstance(d, dict):
            continue
        entry = {}
        for key in ("before_header", "after_header", "before", "after", "prepared"):
            if key in d and d[key] not in (None, ""):
                value = d[key]
                entry[key] = value if isinstance(value, str) else repr(value)
        if entry:
            out.append(entry)
    return out or None


_ACTIVE = {"started": "active", "restarted": "active", "reloaded": "active", "stopped": "inactive"}


def unit_diff(result):
    """For a unit task (systemd_service) that reports no diff of its own: the
    state systemd reported before (its `status`) against the one the task
    wants, so a drifted timer or service shows what it found."""
    status = result.get("status")
    if not result.get("changed") or not isinstance(status, dict) or "ActiveState" not in status:
        return None
    found = {"UnitFileState": status.get("UnitFileState", "unknown"), "ActiveState": status.get("ActiveState")}
    wanted = dict(found)
    if isinstance(result.get("enabled"), bool):
        wanted["UnitFileState"] = "enabled" if result["enabled"] else "disabled"
    if result.get("state") in _ACTIVE:
        wanted["ActiveState"] = _ACTIVE[result["state"]]
    name = str(result.get("name") or status.get("Id") or "unit")
    return [{"before_header": name + " (systemd)", "after_header": name + " (wanted)",
             "before": "".join("%s=%s\n" % kv for kv in sorted(found.items())),
             "after": "".join("%s=%s\n" % kv for kv in sorted(wanted.items()))}]


def host_meta(variables, groups):
    """A report's metadata of one host from its variables and the names of
    its groups: the drift callback's, and `gpufleet drift --from`'s for a
    listed node (from ansible-inventory --list)."""
    gpu = variables.get("gpufleet_gpu") or {}
    return {
        "provider": str(variables.get("gpufleet_provider", "unknown")),
        "region": str(variables.get("gpufleet_region", "unknown")),
        "gpu_model": str(gpu.get("model", "none")) if isinstance(gpu, dict) else "none",
        "groups": sorted(g for g in groups if g != "all"),
        "versions": {},
    }


def exit_code(records, waived=frozenset()):
    """The bitmask: 2 drift, 4 failures, 8 unreachable. `waived` holds
    (host, resource) pairs whose drift is accepted."""
    code = EXIT_CLEAN
    for r in records:
        if r["state"] == DRIFTED and (r["host"], r["resource"]) not in waived:
            code |= EXIT_DRIFT
        elif r["state"] == FAILED:
            code |= EXIT_FAILED
        elif r["state"] == UNREACHABLE:
            code |= EXIT_UNREACHABLE
    return code


def check_report(data, source="report"):
    """Refuse a report this code cannot read, naming what is wrong: another
    schema version, a missing field, a record without a known state."""
    if not isinstance(data, dict):
        raise ValueError("%s: not a drift report (expected a JSON object)" % source)
    version = data.get("version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            "%s: drift report schema version %r, but this code reads version %d: scan with the same "
            "gpufleet.cloud release as the gpufleet CLI that reads the report" % (source, version, SCHEMA_VERSION))
    for key, kind in (("hosts", dict), ("records", list)):
        if not isinstance(data.get(key), kind):
            raise ValueError("%s: drift report without its %r %s" % (source, key, kind.__name__))
    states = [r.get("state") if isinstance(r, dict) else None for r in data["records"]]
    unknown = sorted({str(state) for state in states if state not in STATES})
    if unknown:
        raise ValueError("%s: unknown drift states %s (known: %s)" % (source, unknown, ", ".join(STATES)))
    return data
