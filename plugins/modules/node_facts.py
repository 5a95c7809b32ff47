#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Modules carry GPLv3, as ansible-test's validate-modules requires of every
# module; the rest of the collection is Apache-2.0.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_facts
short_description: What every gpufleet.cloud role needs to know about a node, read once per run
version_added: 0.1.0
description:
  - Internal to gpufleet.cloud. Every role of the collection runs it in its
    preflight, through the internal C(_common) role. It is documented because
    its facts are the one place the roles read a node's GPUs, RDMA devices and
    container status from.
  - Gathers the C(virtual) and C(network) fact subsets where they are missing,
    runs M(gpufleet.cloud.gpu_facts), probes the RDMA ports in sysfs and, in
    check mode, reads the installed packages (check mode installs nothing, so
    the later steps' check-mode conditions read what is installed now).
  - On a node whose package manager is apt (C(ansible_facts.pkg_mgr)), the
    packages are dpkg's own list (C(dpkg-query)), in the form
    M(ansible.builtin.package_facts) gives them; elsewhere, and where
    C(pkg_mgr) was not gathered, package_facts reads them.
  - The first call of a run reads the node; later calls answer from the facts
    without touching it. The facts record the epoch of the node's facts they
    were read with (C(ansible_facts.date_time.epoch)); facts gathered again,
    as every run does, make them stale, so they are never older than the
    node's other facts.
  - Reads, with M(ansible.builtin.slurp), the node view of GPU faults
    (RV(ansible_facts.gpufleet_node.doctor)) - node_health's last report and
    the guard's repairs file - which the P(gpufleet.cloud.drift#callback)
    callback puts in the drift report. A file that is absent or cannot be
    read is reported as such and never fails the task.
  - The GPU counts follow C(ansible_facts.gpu). A later call after
    M(gpufleet.cloud.gpu_facts) read the node again (as nvidia_driver does
    after loading the driver) updates them, without touching the node.
author: gpufleet developers (@gpufleet)
options:
  packages_only:
    description:
      - Read only the installed packages, now, in a run as in check mode, and
        return them as C(packages); nothing else is read or returned. For a
        step that installed packages and reads what is installed after.
    type: bool
    default: false
  health_report_path:
    description:
      - node_health's report on the node (the role's C(node_health_report_dir) + C(/report.json)), read for
        RV(ansible_facts.gpufleet_node.doctor). Absent where node_health is not on the node.
    type: path
    default: /var/lib/gpufleet/health/report.json
  repairs_path:
    description:
      - The guard's repairs file on the node, read for RV(ansible_facts.gpufleet_node.doctor). The guard writes
        it only where its repair ladder is on (C(guard_repair_classes)).
    type: path
    default: /run/gpufleet-guard/repairs.json
attributes:
  action:
    support: full
    description: Runs on the controller and executes read-only modules on the node.
  check_mode:
    support: full
    description: Only reads; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
  facts:
    support: full
    description: Returns C(gpufleet_node), C(gpu) and, in check mode, C(packages); with O(packages_only), only C(packages).
  platform:
    support: full
    platforms: posix
    description: Linux nodes; the roles support Debian and Ubuntu.
seealso:
  - module: gpufleet.cloud.gpu_facts
"""

EXAMPLES = r"""
# In a role of the collection (roles/<role>/tasks/preflight.yml):
- name: Read the node's facts
  ansible.builtin.import_role:
    name: gpufleet.cloud._common
    tasks_from: facts

- name: Use them
  ansible.builtin.debug:
    msg: >-
      GPUs: {{ ansible_facts.gpufleet_node.has_gpus }} ({{ ansible_facts.gpufleet_node.gpus.driver }} run by the driver),
      container: {{ ansible_facts.gpufleet_node.container }}

# After a step installed packages: what is installed now.
- name: Read the installed packages
  gpufleet.cloud.node_facts:
    packages_only: true
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: when the node was read (the first call of a run), or its GPU counts changed since
  type: dict
  contains:
    gpufleet_node:
      description: The node as the roles see it.
      returned: when the node was read
      type: dict
      contains:
        facts_epoch:
          description: C(ansible_facts.date_time.epoch) when these were read.
          type: str
          sample: "1764690000"
        container:
          description: Whether the node is a container sharing its host's kernel (no sysctl, modules, driver or reboot).
          type: bool
          sample: false
        gpus:
          description: The node's GPU counts, each named by where it comes from.
          type: dict
          contains:
            driver:
              description:
                - GPUs the loaded NVIDIA driver runs (C(/proc/driver/nvidia/gpus)), what a role may use now.
                  In a container they count only when the container was given C(/dev/nvidiactl), because
                  C(/proc/driver) is the host's.
              type: int
              sample: 8
            bus:
              description: NVIDIA GPUs on the PCI bus, with or without a driver.
              type: int
              sample: 8
            inventory:
              description:
                - The inventory's C(gpufleet_gpu.count) (a share below 1 for a vGPU or partition), null where the
                  inventory does not know it.
              type: raw
              sample: 8
        has_gpus:
          description:
            - The one decision of whether the node has GPUs, which site.yml (the GPU stack) and the roles read.
              True when the inventory says so (a count above 0, or the C(gpu) group), when the driver runs GPUs,
              or when NVIDIA GPUs sit on the PCI bus outside a container (a container sees its host's bus).
              Unknown counts never make it false on their own.
          type: bool
          sample: true
        rdma_ports:
          description:
            - One entry per port of every RDMA device in sysfs, with its name, port, kernel driver and link layer.
              In a container, empty unless it was given C(/dev/infiniband).
          type: list
          elements: dict
          sample: [{name: mlx5_0, port: "1", driver: mlx5_core, link_layer: InfiniBand}]
        rdma_devices:
          description: The RDMA device names of RV(ansible_facts.gpufleet_node.rdma_ports).
          type: list
          elements: str
          sample: [mlx5_0]
        doctor:
          description:
            - The node view of GPU faults, from O(health_report_path) and O(repairs_path). Each part has a
              C(state) - C(read), C(absent) (the file is not there - node_health, or the guard's repair, is not
              on the node; this says nothing of the GPUs' health) or C(unreadable) (with C(detail), why).
            - C(health), where read, has C(time) and C(status) (pass, fail or unknown) of node_health's last
              report, the C(checks) that did not pass (C(check), C(result), C(detail)) and the C(faults) that
              tripped or are of class C(unknown) (seen, never tripped), each with C(kind), C(code), C(pci),
              C(class), C(step), C(threshold), C(window_minutes), C(count), C(undated), C(last) (Unix time),
              C(tripped) and C(detail); a field the report lacks is null.
            - C(repairs), where read, has C(written) (Unix time) and C(items), the open repairs and those closed
              within a day, each with C(fault), C(class), C(rung), C(first_rung), C(state), C(why),
              C(opened_at) and C(closed_at).
            - Texts are cut to 300 characters.
          type: dict
          sample:
            health: {state: read, time: "2026-12-01T06:00:00.123+00:00", status: fail, checks: [],
                     faults: [{kind: xid, code: 79, pci: "0000:3b:00.0", class: RESTART_BM, step: reboot,
                               threshold: 1, window_minutes: 60, count: 1, undated: 0, last: 1764568800.0,
                               tripped: true, detail: "GPU has fallen off the bus"}]}
            repairs: {state: absent, detail: "File not found: /run/gpufleet-guard/repairs.json"}
    gpu:
      description: What M(gpufleet.cloud.gpu_facts) returns.
      returned: when the node was read
      type: dict
    packages:
      description:
        - The installed packages, as M(ansible.builtin.package_facts) returns them
          - each name maps to a list with one entry per installed architecture.
        - On an apt node, read from dpkg, each entry has C(name), C(version)
          (with its epoch), C(arch) and C(source) C(dpkg); a package of
          another architecture than the node's is named C(name:arch), as apt
          names it. package_facts' C(category) and C(origin) come from apt's
          package lists, not from dpkg, and are not given there (the
          repository's section of a package may differ from its own).
      returned: in check mode, when the node was read; always with O(packages_only)
      type: dict
      sample: {jq: [{name: jq, version: "1.7.1-3", arch: amd64, source: dpkg}]}
"""
