"""Deterministic synthetic fleets in the emulators' seed format.

Tests and the benchmark need many instances that look like a real GPU
fleet: mostly GPU types of several generations, some CPU instances, some
spot, a few stopped, tags, unique private addresses. ``generate`` makes the
same fleet for the same arguments, so a failing test reruns identically.
"""

from __future__ import annotations

import random

TEAMS = ("ml", "infra", "research")
ENVIRONMENTS = ("prod", "dev")


def generate(catalog, regions, count, seed=1, gpu_share=0.9, spot_share=0.2, stopped_share=0.05, prefix="gpu"):
    """``count`` instances spread evenly over ``regions``.

    ``catalog`` is an emulator's CATALOG; types whose name marks no GPU
    (the emulators list exactly one such type) make up 1 - ``gpu_share``.
    """
    rng = random.Random(seed)
    cpu_types = [t for t in catalog if not has_gpu(catalog[t], t)]
    gpu_types = [t for t in catalog if t not in cpu_types]
    instances = []
    for index in range(count):
        region = regions[index % len(regions)]
        gpu = rng.random() < gpu_share or not cpu_types
        roll = rng.random()
        instances.append({
            "region": region,
            "instance_type": rng.choice(gpu_types if gpu else cpu_types),
            # prefix None: no name (AWS seeds identical instances in bulk).
            "name": "%s-%05d" % (prefix, index) if prefix else None,
            "state": "stopped" if roll < stopped_share else "running",
            "charge": "spot" if rng.random() < spot_share else rng.choice(("on_demand", "subscription")),
            # Unique per fleet: 10.<high>.<mid>.<low> from the index.
            "private_ip": "10.%d.%d.%d" % (index // 62500 % 250, index // 250 % 250, index % 250 + 1),
            "public_ip": "203.0.%d.%d" % (index // 250 % 250, index % 250 + 1) if rng.random() < 0.3 else None,
            "tags": {"team": rng.choice(TEAMS), "env": rng.choice(ENVIRONMENTS)},
        })
    return instances


def has_gpu(spec, name):
    # Each emulator's catalogue says "no GPU" its own way.
    if "count" in spec:
        return bool(spec["count"])
    if "gpus" in spec:
        return spec["gpus"] is None or bool(spec["gpus"])
    # AWS: moto knows the types; the catalogue lists names only.
    return not name.startswith(("m", "c", "r", "t"))
