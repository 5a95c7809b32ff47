"""What one `gpufleet drift --fix` did: which of the first scan's drifted
or failed resources the converge repaired (in sync in the scan after it),
which it did not, and why, from the converge's own failures."""

from __future__ import annotations

from .._ansible import failed_task


class Failures:
    """ansible-runner's event handler for the converge: each task that
    failed there (a rescued one too: site.yml records a failed role and
    goes on with the node's others), per host."""

    def __init__(self):
        self.by_host: dict[str, list[dict]] = {}

    def __call__(self, event: dict) -> None:
        failed = failed_task(event)
        if failed is not None:
            self.by_host.setdefault(failed.pop("host"), []).append(failed)


def _short(role: str | None) -> str:
    return (role or "").rsplit(".", 1)[-1]


def outcome(before, after, failures: Failures, rc: int) -> dict:
    """The fix's record: each resource of the first scan that was drifted
    (not waived) or failed, repaired or not; for one not repaired, the
    converge's failure in its role on its host, else its state after."""
    now = {(r["host"], r["resource"]): r for r in after.records}
    # A host the scan after read to the end: a loop item it no longer
    # reports (a member no longer in the group) is one with nothing left to do.
    whole = {h for h, state in after.host_states().items() if state != "unreachable"} - set(after.not_scanned())
    wanted = [r for r in before.records
              if (r["state"] == "drifted" and not r.get("waiver")) or r["state"] == "failed"]
    repaired, not_repaired = [], []
    for r in wanted:
        key = (r["host"], r["resource"])
        later = now.get(key)
        if (later is not None and later["state"] == "in-sync") or (later is None and r["host"] in whole):
            repaired.append({"host": r["host"], "resource": r["resource"]})
            continue
        state = later["state"] if later else "not scanned again"
        roles = {_short(name) for name in (r.get("applied_by") or [r.get("role")])}
        failed = [f for f in failures.by_host.get(r["host"], []) if _short(f["role"]) in roles]
        if failed:
            why = "the converge failed at %r: %s" % (failed[0]["task"], failed[0]["msg"])
        elif later is not None and later.get("message"):
            why = "%s after the converge: %s" % (state, later["message"])
        else:
            why = "%s after the converge" % state
        not_repaired.append({"host": r["host"], "resource": r["resource"], "state": state, "why": why})
    return {"converge_rc": rc, "repaired": repaired, "not_repaired": not_repaired}


def lines(fix: dict) -> list[str]:
    total = len(fix["repaired"]) + len(fix["not_repaired"])
    out = [f"fix: repaired {len(fix['repaired'])} of {total} drifted or failed resources"]
    for r in fix["not_repaired"]:
        out.append(f"fix: not repaired: {r['host']}: {r['resource']}: {r['why'].splitlines()[0][:300]}")
    return out
