# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One GPU instance record with the same keys on every cloud.

Private to gpufleet.cloud: the inventory plugins and the
gpu_instance_info module build their output from these records, so a
playbook sees the same ``gpufleet_*`` variables whichever cloud a host
lives on. Pure functions only: no SDK, no network.
"""

from __future__ import annotations

import re

# Every record has exactly these keys; the inventory plugins publish each
# one as a ``gpufleet_<key>`` host variable.
RECORD_KEYS = (
    "provider",
    "region",
    "zone",
    "instance_id",
    "instance_type",
    "name",
    "state",
    "private_ip",
    "public_ip",
    "gpu",
    "gpu_source",
    "spot",
    "charge_type",
    "tags",
    "rdma",
)

# Normalised lifecycle states. The clouds name them differently (Running,
# RUNNING, ACTIVE, running); filters and groups use these.
STATES = (
    "pending",
    "running",
    "stopping",
    "stopped",
    "rebooting",
    "terminating",
    "terminated",
    "error",
    "unknown",
)
# What an inventory lists when no state filter is given: everything that
# still exists, as amazon.aws.aws_ec2 does by default.
DEFAULT_STATES = tuple(s for s in STATES if s not in ("terminating", "terminated"))

# Where a record's GPU data came from: the cloud's API, the built-in
# catalogue of GPU instance families, or nowhere. "unknown" is never "no
# GPU": its model and count are null, and gpu_only keeps it.
GPU_SOURCES = ("api", "catalogue", "unknown")

CHARGE_TYPES = ("on_demand", "subscription", "spot", "dedicated_host", "unknown")
# "unknown": the data that says it (the instance type's) could not be read.
RDMA_KINDS = ("efa", "erdma", "roce", "ib", "none", "unknown")

_STATE_MAPS = {
    "aws": {
        "pending": "pending",
        "running": "running",
        "stopping": "stopping",
        "stopped": "stopped",
        "shutting-down": "terminating",
        "terminated": "terminated",
    },
    "aliyun": {
        "Pending": "pending",
        "Starting": "pending",
        "Running": "running",
        "Stopping": "stopping",
        "Stopped": "stopped",
    },
    "tencent": {
        "PENDING": "pending",
        "LAUNCH_FAILED": "error",
        "STARTING": "pending",
        "RUNNING": "running",
        "STOPPING": "stopping",
        "STOPPED": "stopped",
        "REBOOTING": "rebooting",
        # SHUTDOWN is an instance isolated for non-payment: not running and
        # not reachable, but it still exists.
        "SHUTDOWN": "stopped",
        "TERMINATING": "terminating",
    },
    "huawei": {
        "BUILD": "pending",
        "REBUILD": "pending",
        "ACTIVE": "running",
        # A live migration keeps the guest running.
        "MIGRATING": "running",
        "RESIZE": "pending",
        "VERIFY_RESIZE": "pending",
        "REVERT_RESIZE": "pending",
        "REBOOT": "rebooting",
        "HARD_REBOOT": "rebooting",
        "SHUTOFF": "stopped",
        "PAUSED": "stopped",
        "SUSPENDED": "stopped",
        "SHELVED": "stopped",
        "SHELVED_OFFLOADED": "stopped",
        "ERROR": "error",
        "SOFT_DELETED": "terminating",
        "DELETED": "terminated",
    },
}

# Words that name a vendor or a product line rather than the GPU itself:
# "NVIDIA Tesla V100-NVLINK-32G" is a V100.
_NOISE = frozenset(("NVIDIA", "TESLA", "GEFORCE", "QUADRO", "GPU", "AMD", "RADEON", "INSTINCT", "DATACENTER"))
# A GPU model token: a family letter and a number, optionally one suffix
# letter (A100, H20, L40S, A10G, T4G, V100S) or a Grace-Blackwell GB200.
_MODEL_TOKEN = re.compile(r"^(GB\d{3}|[ABHKLMPTV]\d{1,3}[A-Z]?)$")
_SEPARATORS = re.compile(r"[\s_/*:,()+-]+")


def normalize_gpu_model(raw):
    """The GPU model in its short upper-case form, or None.

    Accepts what each cloud reports: Aliyun's GPUSpec ("NVIDIA A10"),
    Tencent's GPUType ("NVIDIA Tesla V100-NVLINK-32G"), Huawei's flavor GPU
    name or PCI alias ("nvidia-a100"), AWS's GpuInfo name ("L40S").
    A name with no recognisable model token comes back cleaned up
    ("RTX PRO Server 6000" -> "RTX-PRO-SERVER-6000"), so an unknown GPU
    still gets a stable group instead of disappearing.
    """
    if raw is None:
        return None
    text = str(raw).strip().upper()
    if not text:
        return None
    tokens = [t for t in _SEPARATORS.split(text) if t and t not in _NOISE]
    for token in tokens:
        if _MODEL_TOKEN.match(token):
            return token
    return "-".join(tokens) or None


def normalize_state(provider, raw):
    """The normalised state (see STATES) of a cloud's raw state name."""
    if raw is None:
        return "unknown"
    return _STATE_MAPS[provider].get(str(raw), "unknown")


# A vGPU slice at the end of a GPU name: Alibaba's vGPU types (sgn7i-vws,
# vgn7i-vws, vgn6i-vws) say theirs in GPUSpec, "NVIDIA A10 * 1/6".
_SLICE = re.compile(r"\*\s*(\d+)\s*/\s*(\d+)\s*$")


def slice_of(name):
    """The share of one GPU that a GPU name says it is ("NVIDIA A10 * 1/6":
    1/6), or None when the name says no share below a whole GPU."""
    match = _SLICE.search(str(name or ""))
    if not match:
        return None
    part, whole = int(match.group(1)), int(match.group(2))
    return part / whole if 0 < part < whole else None


def is_share(count):
    """Whether a GPU count is a share of GPUs, not a whole number of them
    (0.125 of an L4, 1/6 of an A10): a partition or a vGPU slice."""
    return isinstance(count, float) and not count.is_integer()


def gpu_count(value):
    """A GPU count as int when whole, float for a vGPU slice (0.25), 0 if absent."""
    if value in (None, ""):
        return 0
    number = float(value)
    if number < 0:
        return 0
    return int(number) if number.is_integer() else number


def mib(value, unit="MiB"):
    """Memory as whole MiB from a value in MiB, MB (taken as MiB) or GiB."""
    if value in (None, ""):
        return None
    number = float(value)
    if number <= 0:
        return None
    if unit == "GiB":
        number *= 1024
    return int(round(number))


def gpu_info(model=None, count=0, memory_mib=None):
    """The ``gpu`` part of a record. ``memory_mib`` is the memory of one GPU."""
    count = gpu_count(count)
    model = normalize_gpu_model(model)
    if not count:
        # Instance types without GPUs still carry empty GPU fields on some
        # clouds; a record never claims a model it has no GPU of.
        return {"model": None, "count": 0, "memory_mib": None}
    return {"model": model, "count": count, "memory_mib": memory_mib}


def unknown_gpu():
    """The ``gpu`` part of a record whose GPU data could not be found."""
    return {"model": None, "count": None, "memory_mib": None}


def make_record(provider, region, instance_id, **fields):
    """A complete record: every key of RECORD_KEYS, with defaults.

    Unknown keys are a programming error in an adapter, so they raise.
    """
    unknown = set(fields) - set(RECORD_KEYS)
    if unknown:
        raise KeyError("unknown record fields: %s" % ", ".join(sorted(unknown)))
    charge_type = fields.get("charge_type") or "unknown"
    if charge_type not in CHARGE_TYPES:
        raise ValueError("charge_type %r is not one of %s" % (charge_type, ", ".join(CHARGE_TYPES)))
    gpu_source = fields.get("gpu_source") or "api"
    if gpu_source not in GPU_SOURCES:
        raise ValueError("gpu_source %r is not one of %s" % (gpu_source, ", ".join(GPU_SOURCES)))
    rdma = fields.get("rdma") or "none"
    if rdma not in RDMA_KINDS:
        raise ValueError("rdma %r is not one of %s" % (rdma, ", ".join(RDMA_KINDS)))
    return {
        "provider": provider,
        "region": region,
        "zone": fields.get("zone"),
        "instance_id": instance_id,
        "instance_type": fields.get("instance_type"),
        "name": fields.get("name") or None,
        "state": fields.get("state") or "unknown",
        "private_ip": fields.get("private_ip") or None,
        "public_ip": fields.get("public_ip") or None,
        "gpu": fields.get("gpu") or gpu_info(),
        "gpu_source": gpu_source,
        "spot": charge_type == "spot",
        "charge_type": charge_type,
        "tags": dict(fields.get("tags") or {}),
        "rdma": rdma,
    }


def tags_from_pairs(pairs, key="Key", value="Value"):
    """Tags as a dict from a list of {Key: k, Value: v} mappings."""
    return {p[key]: p.get(value) if p.get(value) is not None else "" for p in pairs or () if p.get(key)}


def first(values):
    """The first non-empty item of a list, or None."""
    for value in values or ():
        if value:
            return value
    return None


def gpu_unknown(record):
    """Whether nothing is known about the record's GPUs (not: "it has none")."""
    return record.get("gpu_source") == "unknown" or record["gpu"]["count"] is None


def matches(record, states=None, tags=None, gpu_only=True, keep_gpu_unknown=True):
    """Whether a record passes the inventory filters.

    ``states``: normalised states to keep (None: DEFAULT_STATES).
    ``tags``: {key: None | value | [values]}; every key must be present,
    and when values are given the tag must equal one of them.
    ``gpu_only``: keep only instances with at least a slice of a GPU, and,
    unless ``keep_gpu_unknown`` is false, those whose GPU data is unknown.
    """
    if gpu_only:
        if gpu_unknown(record):
            if not keep_gpu_unknown:
                return False
        elif not record["gpu"]["count"]:
            return False
    if record["state"] not in (DEFAULT_STATES if states is None else states):
        return False
    for key, wanted in (tags or {}).items():
        if key not in record["tags"]:
            return False
        if wanted is None:
            continue
        allowed = wanted if isinstance(wanted, (list, tuple)) else [wanted]
        if record["tags"][key] not in [str(v) for v in allowed]:
            return False
    return True


def check_filters(filters):
    """(states, tags) from the ``filters`` option, or ValueError naming the
    part that is wrong. ``states`` is None when no state filter was given."""
    if filters is None:
        return None, {}
    if not isinstance(filters, dict):
        raise ValueError("filters: expected a mapping with the keys state and tags, got %s" % type(filters).__name__)
    unknown = sorted(set(filters) - {"state", "tags"})
    if unknown:
        raise ValueError("filters: unknown key %s (known: state, tags)" % ", ".join(repr(k) for k in unknown))
    states = filters.get("state")
    if states is not None:
        if isinstance(states, str):
            states = [states]
        if not isinstance(states, (list, tuple)):
            raise ValueError("filters.state: expected a list of states, got %s" % type(states).__name__)
        bad = [s for s in states if s not in STATES]
        if bad:
            raise ValueError("filters.state: %s is not a state (states: %s)" % (", ".join(map(repr, bad)), ", ".join(STATES)))
        states = tuple(states)
    tags = filters.get("tags") or {}
    if not isinstance(tags, dict):
        raise ValueError("filters.tags: expected a mapping of tag key to value, got %s" % type(tags).__name__)
    return states, tags
