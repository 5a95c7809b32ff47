# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet.cloud.node_facts: what every role needs to know about a node,
read once per run and node (see plugins/modules/node_facts.py for the
documentation).

One action instead of a setup, a package read, a GPU probe and an RDMA
probe in each role's preflight: every role calls it, the first call of a
run reads the node, and the later ones answer from the facts without
touching it. A node's other facts decide what "this run" means: the node
facts carry the epoch of the facts they were read with, so facts gathered
again (a new run) make them stale."""

from __future__ import annotations

import base64
import json

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr
from ansible_collections.gpufleet.cloud.plugins.plugin_utils import _node_doctor
from ansible_collections.gpufleet.cloud.plugins.plugin_utils._action import run_read_only
from ansible_collections.gpufleet.cloud.plugins.plugin_utils._dpkg import DPKG_QUERY, dpkg_packages
from ansible_collections.gpufleet.cloud.plugins.test.node import container_node

# One JSON line per port of every RDMA device: its name, its kernel driver
# and the port's link layer (InfiniBand, or Ethernet for RoCE); then whether
# the device nodes exist, which a container has only when it was given them.
RDMA_PROBE = r"""
for port in /sys/class/infiniband/*/ports/*; do
  [ -e "$port" ] || continue
  dev=${port%/ports/*}
  driver=""
  [ -e "$dev/device/driver" ] && driver=$(basename "$(readlink -f "$dev/device/driver")")
  printf '{"name": "%s", "port": "%s", "driver": "%s", "link_layer": "%s"}\n' \
    "$(basename "$dev")" "$(basename "$port")" "$driver" "$(cat "$port/link_layer" 2>/dev/null)"
done
[ -e /dev/infiniband ] && echo DEVICE_NODES
exit 0
"""

# Fact subsets the roles read beyond the minimal ones, and a fact that
# tells whether each was gathered.
SUBSETS = (("virtual", "virtualization_type"), ("network", "all_ipv4_addresses"))


def inventory_gpus(gpufleet_gpu):
    """The inventory's GPU count (gpufleet_gpu.count): a number, a share
    below 1, or None where the inventory does not know it."""
    count = gpufleet_gpu.get("count") if isinstance(gpufleet_gpu, dict) else None
    try:
        return None if count in (None, "") else gr.gpu_count(count)
    except (TypeError, ValueError):
        return None


def gpu_facets(gpu, container, inventory, in_gpu_group=False):
    """The node's GPU counts, each named by where it comes from, and the one
    decision of whether it has GPUs, which site.yml and the roles read.

    driver: GPUs the loaded driver runs that this node may use. /proc/driver
    is the host's in a container: its GPUs count there only when the
    container was given the control device. bus: NVIDIA GPUs on the PCI bus,
    with or without a driver. inventory: gpufleet_gpu.count, None unknown.
    A node has GPUs when the inventory says so (a count above 0, a share
    included, or the gpu group), when the driver runs some, or when some sit
    on the bus outside a container (a container sees its host's bus)."""
    usable = (gpu.get("driver_gpus") or []) if (not container or gpu.get("control_device")) else []
    facets = {"driver": len(usable), "bus": len(gpu.get("pci_gpus") or []), "inventory": inventory}
    has = bool(in_gpu_group or (inventory or 0) > 0 or facets["driver"] > 0 or (facets["bus"] > 0 and not container))
    return {"gpus": facets, "has_gpus": has}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("packages_only", "health_report_path", "repairs_path"))

    @staticmethod
    def _checked(result, what):
        if result.get("failed") or result.get("unreachable"):
            raise AnsibleActionFail("gpufleet.cloud.node_facts could not read %s: %s"
                                    % (what, result.get("msg") or result.get("module_stderr") or result))
        return result

    def _module(self, name, args, task_vars, what):
        return self._checked(self._execute_module(module_name=name, module_args=args, task_vars=task_vars), what)

    def _read(self, script, task_vars, what):
        """A shell script that only reads the node, in check mode too."""
        return self._checked(run_read_only(self, script, task_vars), what)

    def _packages(self, task_vars, facts):
        if facts.get("pkg_mgr") != "apt":
            result = self._module("ansible.legacy.package_facts", {"manager": "auto"}, task_vars, "the packages")
            return result.get("ansible_facts") or {}
        result = self._read(DPKG_QUERY, task_vars, "the packages")
        try:
            return {"packages": dpkg_packages(result.get("stdout") or "")}
        except ValueError as error:
            raise AnsibleActionFail("gpufleet.cloud.node_facts could not read the packages: %s" % error) from None

    def _rdma_ports(self, task_vars, container):
        result = self._read(RDMA_PROBE, task_vars, "the RDMA devices")
        lines = result.get("stdout_lines") or []
        ports = [self._json_line(line) for line in lines if line.startswith("{")]
        if container and "DEVICE_NODES" not in lines:
            return []
        return ports

    def _inventory(self, task_vars):
        """(gpufleet_gpu.count, membership of the gpu group), templated as
        the play would read them."""
        gpufleet_gpu = task_vars.get("gpufleet_gpu")
        if gpufleet_gpu is not None:
            gpufleet_gpu = self._templar.template(gpufleet_gpu)
        return inventory_gpus(gpufleet_gpu), "gpu" in (task_vars.get("group_names") or [])

    def _file(self, path, task_vars):
        """(read, text), (absent, why) or (unreadable, why) of a file on the
        node, read by slurp (read-only, in check mode too). Never raises:
        a file that cannot be read is a finding, not a failed task."""
        try:
            result = self._execute_module(module_name="ansible.legacy.slurp", module_args={"src": path},
                                          task_vars=task_vars)
        except AnsibleError as error:  # the rest of the scan goes on
            return _node_doctor.UNREADABLE, "%s: %s" % (path, error)
        if result.get("failed") or result.get("unreachable") or "content" not in result:
            msg = str(result.get("msg") or result.get("module_stderr") or "no content")
            return (_node_doctor.ABSENT if "not found" in msg.lower() else _node_doctor.UNREADABLE), msg
        try:
            return _node_doctor.READ, base64.b64decode(result["content"]).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as error:
            return _node_doctor.UNREADABLE, "%s is not UTF-8 text (%s)" % (path, error)

    def _doctor(self, args, task_vars, epoch):
        """The node view of GPU faults: node_health's last report and the
        guard's repairs (plugin_utils/_node_doctor.py)."""
        try:
            now = float(epoch)
        except (TypeError, ValueError):
            now = None
        return _node_doctor.doctor(self._file(args["health_report_path"], task_vars),
                                   self._file(args["repairs_path"], task_vars), now)

    @staticmethod
    def _json_line(line):
        try:
            return json.loads(line)
        except ValueError:
            raise AnsibleActionFail("gpufleet.cloud.node_facts: the RDMA probe printed %r, not JSON" % line) from None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        facts = dict(task_vars.get("ansible_facts") or {})
        epoch = (facts.get("date_time") or {}).get("epoch")
        node = facts.get("gpufleet_node") or {}
        check_mode = bool(self._task.check_mode)
        _spec, args = self.validate_argument_spec(argument_spec={
            "packages_only": {"type": "bool", "default": False},
            "health_report_path": {"type": "path", "default": _node_doctor.HEALTH_REPORT},
            "repairs_path": {"type": "path", "default": _node_doctor.REPAIRS}})
        if args["packages_only"]:
            # After an install: what is installed now, and nothing else.
            result.update(changed=False, ansible_facts=self._packages(task_vars, facts))
            return result
        if epoch and node.get("facts_epoch") == epoch and (not check_mode or "packages" in facts):
            # A later gpu_facts (nvidia_driver's, after it loaded the driver)
            # refreshed ansible_facts.gpu: the counts follow it, as a role
            # that looked at the node now would see.
            # The inventory's count is the first call's: it does not change
            # within a run, and templating it again per role costs a pass.
            counts = gpu_facets(facts.get("gpu") or {}, node.get("container"),
                                (node.get("gpus") or {}).get("inventory"),
                                "gpu" in (task_vars.get("group_names") or []))
            if any(node.get(key) != value for key, value in counts.items()):
                result["ansible_facts"] = {"gpufleet_node": dict(node, **counts)}
            result.update(changed=False, msg="read earlier in this run")
            return result

        new = {}
        missing = [subset for subset, fact in SUBSETS if fact not in facts]
        if missing:
            gathered = self._module("ansible.legacy.setup", {"gather_subset": ["!all", "!min"] + missing},
                                    task_vars, "the %s facts" % " and ".join(missing))
            new.update(gathered.get("ansible_facts") or {})
        # setup names its facts ansible_*; a play reads them without the prefix.
        facts.update({k[len("ansible_"):] if k.startswith("ansible_") else k: v for k, v in new.items()})
        container = container_node(facts)

        gpu = self._module("gpufleet.cloud.gpu_facts", {}, task_vars, "the GPUs")["ansible_facts"]["gpu"]
        new["gpu"] = gpu
        if check_mode:
            # Check mode installs nothing, so what is installed now is what the
            # later steps' check-mode conditions must read.
            new.update(self._packages(task_vars, facts))

        rdma_ports = self._rdma_ports(task_vars, container)
        new["gpufleet_node"] = {
            "facts_epoch": epoch,
            "container": container,
            **gpu_facets(gpu, container, *self._inventory(task_vars)),
            "rdma_ports": rdma_ports,
            "rdma_devices": sorted({port["name"] for port in rdma_ports}),
            "doctor": self._doctor(args, task_vars, epoch),
        }
        result.update(changed=False, ansible_facts=new)
        return result
