"""Waivers: accepted drift, with a reason and an expiry date.

File format (YAML):

    waivers:
      - host: "lab-node-*"          # fnmatch pattern
        resource: "*chrony*"        # fnmatch pattern on the resource id
        reason: "testing a new NTP pool, ticket OPS-123"
        expires: 2026-12-31         # the waiver stops applying after this day

Waived drift is still shown, but does not set the exit code until it expires.
"""

from __future__ import annotations

import datetime
import fnmatch
from pathlib import Path

import yaml

REQUIRED = ("host", "resource", "reason", "expires")


class WaiverError(ValueError):
    pass


def load(path: Path) -> list[dict]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise WaiverError(f"{path}: not valid YAML: {exc}") from None
    entries = data.get("waivers") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise WaiverError(f"{path}: expected a top-level 'waivers' list")
    waivers = []
    for i, w in enumerate(entries):
        where = f"{path}: waivers[{i}]"
        if not isinstance(w, dict):
            raise WaiverError(f"{where}: expected a mapping")
        missing = [k for k in REQUIRED if k not in w]
        if missing:
            raise WaiverError(f"{where}: missing {', '.join(missing)}")
        unknown = sorted(set(w) - set(REQUIRED))
        if unknown:
            raise WaiverError(f"{where}: unknown key(s) {', '.join(unknown)}")
        expires = w["expires"]
        if isinstance(expires, str):
            try:
                expires = datetime.date.fromisoformat(expires)
            except ValueError:
                raise WaiverError(f"{where}: expires must be a date (YYYY-MM-DD), got {expires!r}") from None
        if not isinstance(expires, datetime.date):
            raise WaiverError(f"{where}: expires must be a date (YYYY-MM-DD), got {expires!r}")
        if not str(w["reason"]).strip():
            raise WaiverError(f"{where}: reason must not be empty")
        waivers.append({"host": str(w["host"]), "resource": str(w["resource"]),
                        "reason": str(w["reason"]), "expires": expires})
    return waivers


def apply(records: list[dict], waivers: list[dict], today: datetime.date | None = None) -> None:
    """Mark each drifted record covered by a waiver. An expired waiver is
    noted but no longer accepts the drift."""
    today = today or datetime.date.today()
    for r in records:
        if r["state"] != "drifted":
            continue
        for w in waivers:
            if fnmatch.fnmatchcase(r["host"], w["host"]) and fnmatch.fnmatchcase(r["resource"], w["resource"]):
                if w["expires"] >= today:
                    r["waiver"] = {"reason": w["reason"], "expires": w["expires"].isoformat()}
                else:
                    r["waiver_expired"] = {"reason": w["reason"], "expires": w["expires"].isoformat()}
                break
