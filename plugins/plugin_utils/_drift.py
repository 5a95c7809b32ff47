# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift classification: one record per host x resource from a check-mode run.

Kept apart from the callback so the rules can be unit tested without running
a playbook. Controller-only.
"""

from __future__ import annotations

IN_SYNC = "in-sync"
DRIFTED = "drifted"
FAILED = "failed"
UNREACHABLE = "unreachable"
NOT_VERIFIED = "could-not-verify"
STATES = (IN_SYNC, DRIFTED, FAILED, UNREACHABLE, NOT_VERIFIED)

REDACTED = "<redacted: no_log>"
# Tasks with this tag (cache refreshes, probes) are never recorded.
IGNORE_TAG = "gpufleet_drift_ignore"

# Actions that read, decide or include, but own no resource on the node:
# their outcome is not a statement about drift.
READ_ONLY_ACTIONS = frozenset(
    a
    for name in (
        "assert", "debug", "fail", "set_fact", "set_stats", "meta", "pause", "validate_argument_spec",
        "include_tasks", "import_tasks", "include_role", "import_role", "include_vars", "add_host", "group_by",
        "setup", "gather_facts", "package_facts", "service_facts", "stat", "find", "slurp", "wait_for",
        "wait_for_connection", "getent", "ping",
    )
    for a in (name, "ansible.builtin." + name, "ansible.legacy." + name)
) | frozenset(("gpufleet.cloud.gpu_facts", "gpu_facts"))

# Actions that cannot be checked without running them.
COMMAND_ACTIONS = frozenset(
    a for name in ("command", "shell", "raw", "script") for a in (name, "ansible.builtin." + name, "ansible.legacy." + name)
)


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
        if action in COMMAND_ACTIONS or "does not support check mode" in msg:
            # The module itself declined to run in check mode.
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


def exit_code(records, waived=frozenset()):
    """The bitmask: 2 drift, 4 failures, 8 unreachable. `waived` holds
    (host, resource) pairs whose drift is accepted."""
    code = 0
    for r in records:
        if r["state"] == DRIFTED and (r["host"], r["resource"]) not in waived:
            code |= 2
        elif r["state"] == FAILED:
            code |= 4
        elif r["state"] == UNREACHABLE:
            code |= 8
    return code
