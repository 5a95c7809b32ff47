# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Options every gpufleet.cloud GPU inventory plugin shares. Each plugin
    # adds its own credentials and endpoint options.
    DOCUMENTATION = r"""
options:
  regions:
    description:
      - Regions to list instances in. They are queried in parallel.
      - Empty means every region the account can use, discovered through the cloud's API.
      - A name that is not shaped like a region of this cloud is a configuration error.
    type: list
    elements: str
    default: []
  workers:
    description:
      - The most regions queried at the same time.
    type: int
    default: 16
  strict_regions:
    description:
      - When V(false), a region that cannot be listed is left out with a warning that names
        the region and the error, and the other regions' hosts are listed.
      - When V(true), any failed region fails the inventory, and so does a region whose total
        count (Tencent's C(TotalCount), Huawei's C(count)) is lower than the instances its pages
        held, which is otherwise a warning with every instance kept.
      - Either way, the inventory fails when every region failed, and a run with a failed
        region never writes the cache.
    type: bool
    default: false
  filters:
    description:
      - Which instances become hosts. Applied to the normalised records, so they mean the
        same on every cloud.
    type: dict
    default: {}
    suboptions:
      state:
        description:
          - Normalised states to keep.
          - Without it, every state but V(terminating) and V(terminated) is kept, as
            C(amazon.aws.aws_ec2) does.
        type: list
        elements: str
        choices: [pending, running, stopping, stopped, rebooting, terminating, terminated, error, unknown]
      tags:
        description:
          - Tags an instance must carry, as a mapping of tag key to value.
          - A value may be a list (any of them matches) or null (the key alone must be present).
        type: dict
  hostnames:
    description:
      - Where a host's inventory name comes from, in order of preference.
      - Each entry is a record field (V(private_ip), V(public_ip), V(instance_id), V(name))
        or V(tag:KEY) for the value of the tag KEY.
      - The first entry with a value that no other host of the inventory already has wins
        (hosts of other sources included), so two instances with the same private address in
        different regions or clouds both stay listed. An instance with no usable name is left
        out, with a warning.
      - Instances with the same name stay distinct hosts - with V(name) first and V(instance_id)
        after it, the first of them (by region, then instance id) gets the name and the others
        their instance ids.
      - An instance without a private IP is kept, named by the next entry, with a warning that
        names it and says what Ansible connects to; the plugin sets no C(ansible_host) itself
        (compose one, for example from C(gpufleet_public_ip)).
    type: list
    elements: str
    default: [private_ip, instance_id]
  timeout:
    description:
      - Seconds each API call may take (connect and read) before it fails.
    type: float
    default: 30
  retries:
    description:
      - How many times a throttled call is retried, with jittered exponential backoff.
      - Only throttling is retried; any other error fails the region at once.
    type: int
    default: 4
notes:
  - Regions are queried in parallel. One failing region is left out with a warning instead of
    failing the inventory, unless O(strict_regions) is set; throttled calls are retried with
    jittered backoff.
  - Credentials are never printed. Keep them out of inventory files and let the SDK's own chain
    find them (environment, profile file, instance role).
  - Every instance becomes a host with these variables, the same on every cloud -
    C(gpufleet_provider), C(gpufleet_region), C(gpufleet_zone), C(gpufleet_instance_id),
    C(gpufleet_instance_type), C(gpufleet_name), C(gpufleet_state), C(gpufleet_private_ip),
    C(gpufleet_public_ip), C(gpufleet_gpu) (a dict of C(model), C(count) and C(memory_mib),
    the memory of one GPU), C(gpufleet_spot), C(gpufleet_charge_type)
    (C(on_demand), C(subscription), C(spot), C(dedicated_host) or C(unknown)),
    C(gpufleet_tags) and C(gpufleet_rdma) (C(efa), C(erdma), C(roce), C(ib), C(none), or C(unknown) when the
    instance type, which says it, could not be looked up).
  - GPU models are normalised to their short names (C(A100), C(H100), C(H20), C(L40S), C(A10),
    C(T4), C(V100) ...) from whatever the cloud reports.
  - "Fixed groups: C(cloud_<provider>), C(region_<region>) and C(gpu_<model>), in lower case with
    C(-) turned into C(_) (C(region_cn_hangzhou), C(gpu_a100)), C(spot), C(gpu_unknown) (GPU data not
    known), and C(gpu_share): a share of GPUs rather than whole ones, a vGPU slice or a partition, whose
    C(gpufleet_gpu.count) is the float it is (C(0.25)), never rounded to 0 or 1."
  - Group names from O(keyed_groups) and O(groups) are always made valid - characters Ansible rejects
    in a group name (spaces, dots, colons in tags) become C(_), whatever C(TRANSFORM_INVALID_GROUP_CHARS)
    says. C(gpufleet_tags) keeps the tags exactly as the API gives them.
  - A listing page that fails fails its whole region (never a partial listing), with a message naming
    the action and the page. A region that stops answering fails after O(timeout).
  - Every value that comes from the cloud API is marked unsafe, so a tag value that looks
    like a template is never templated.
  - With O(cache) on, a cache hit makes no API call at all, not even to resolve credentials.
"""

    # The GPU filter, shared with the gpu_instance_info module
    # (gpufleet.cloud.gpu_inventory.gpu_filter).
    GPU_FILTER = r"""
options:
  gpu_only:
    description:
      - Only instances with at least one GPU (or a vGPU slice), and those whose GPU data is unknown
        (see O(gpu_unknown)).
    type: bool
    default: true
  gpu_unknown:
    description:
      - With O(gpu_only), keep instances whose GPU data could not be found (an instance type the API could
        not look up). Their C(gpu) has C(model) and C(count) null and their C(gpu_source) is V(unknown)
        (as host variables C(gpufleet_gpu) and C(gpufleet_gpu_source), in the inventory group
        C(gpu_unknown)); unknown never counts as no GPU.
      - Set to V(false) to leave them out; each one left out is named in a warning.
    type: bool
    default: true
"""
