"""Fleet drift end to end on the lab: converge, a clean scan, drift made by
hand on one node found exactly, the HTML report looked at in a real browser,
--fix, and an unreachable node reported while the others still are.

The lab's first node is a GPU-stack node (LAB_UP, tests/integration/conftest.py):
it also takes site.yml's GPU play, so Docker's daemon.json and
/etc/nccl.conf are resources of this fleet too."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.integration.conftest import GPU_NODE, LAB_HOSTS, LAB_UP, PLAIN_NODE, lab_container
from tests.integration.helpers import gpufleet
from tests.support.nodes import ROOT, node_exec
from tests.support.prometheus import serve
from tests.support.waiting import wait_for

# One lab fleet at a time: its node names, addresses and emulator ports are
# fixed, so with `pytest -n` these modules run on one worker.
pytestmark = [pytest.mark.lab, pytest.mark.xdist_group("lab-fleet")]

BASELINE = "gpufleet.cloud.baseline : "
MONITORING = "gpufleet.cloud.monitoring : "
DOCKER = "gpufleet.cloud.docker : "
SECURITY = "gpufleet.cloud.security : "
NVIDIA_PACKAGES = "gpufleet.cloud._nvidia_packages : "
BACKUP = "gpufleet.cloud.backup : "
GUARD = "gpufleet.cloud.guard : "
# The units of the roles' node-side programs (_common's node_units step).
NODE_UNITS = "gpufleet.cloud._common : "


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One row of the mutation matrix: a change made by hand to what a node
    runs, and the resources that must report it, on that host only. `shows`
    is what the first resource's diff must contain."""

    host: str
    what: str  # the class of state it changes (docs/drift.md)
    argv: tuple[str, ...]
    flags: tuple[str, ...]
    shows: str | None = None
    # A blocker makes a check fail: its resource is failed, before and
    # after --fix, and it must hide or block nothing else on its host.
    blocker: bool = False


def sh(script):
    return ("sh", "-c", script)


# Applied in one batch, on both nodes, so the matrix costs one
# `drift --fix` cycle. Adding a class means adding rows. Order matters
# within a node: jq is used before it is removed.
MUTATIONS = (
    # The GPU-stack node.
    # The blocker: a foreign drop-in that sorts before the role's wins over
    # it and turns passwords back on. This node reports such lines instead
    # of commenting them out (security_sshd_overrides: report,
    # inventories/lab), so security's check fails. Every other row of this
    # node (the firewall row in the same role, and every role after it) is
    # still reported by the same scan and repaired by the same --fix, and
    # the message names the file.
    Mutation(GPU_NODE, "blocker: a foreign sshd drop-in that sorts first",
             sh("printf 'PasswordAuthentication yes\\n' > /etc/ssh/sshd_config.d/00-aaa-local.conf"
                " && systemctl restart ssh"),
             (SECURITY + "Check that sshd uses the hardened settings",),
             "/etc/ssh/sshd_config.d/00-aaa-local.conf", blocker=True),
    # dockerd restarted with a flag site.yml does not give, from a runtime
    # drop-in that is gone again: no file the role reads changed, only the
    # command line that runs. Before the daemon.json row, whose change must
    # come after this start to be a second reason.
    Mutation(GPU_NODE, "Docker's running flags",
             sh("d=/run/systemd/system/docker.service.d && mkdir -p $d"
                " && printf '[Service]\\nExecStart=\\nExecStart=/usr/sbin/dockerd -H fd://"
                " --containerd=/run/containerd/containerd.sock --debug\\n' > $d/by-hand.conf"
                " && systemctl daemon-reload && systemctl restart docker"
                " && rm $d/by-hand.conf && systemctl daemon-reload && sleep 1"),
             (DOCKER + "Check that dockerd runs its current configuration",), "--debug"),
    Mutation(GPU_NODE, "file (JSON) and the daemon that reads it",
             sh("jq '.\"log-opts\".\"max-size\" = \"1g\"' /etc/docker/daemon.json > /tmp/daemon.json"
                " && cat /tmp/daemon.json > /etc/docker/daemon.json"),
             # The file differs, and dockerd runs the configuration from
             # before it changed: two states, two records.
             (DOCKER + "Write daemon.json", DOCKER + "Check that dockerd runs its current configuration"), "1g"),
    Mutation(GPU_NODE, "file", sh("echo NCCL_DEBUG=TRACE >> /etc/nccl.conf"),
             ("gpufleet.cloud.nccl : Write /etc/nccl.conf",), "TRACE"),
    Mutation(GPU_NODE, "sysctl file",
             ("sed", "-i", "s/^vm.zone_reclaim_mode=0/vm.zone_reclaim_mode=1/", "/etc/sysctl.d/90-gpufleet-baseline.conf"),
             (BASELINE + "Write kernel parameters for GPU, NCCL and RDMA workloads [vm.zone_reclaim_mode]",),
             "vm.zone_reclaim_mode = 1"),
    # Running kernel parameters of the GPU-stack node's own network
    # namespace (a privileged container sets those; docs/drift.md).
    Mutation(GPU_NODE, "kernel parameter", ("sysctl", "-q", "-w", "net.ipv4.tcp_mtu_probing=0"),
             (BASELINE + "Write kernel parameters for GPU, NCCL and RDMA workloads [net.ipv4.tcp_mtu_probing]",), "running: 0"),
    Mutation(GPU_NODE, "kernel parameter", ("sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=0"),
             (BASELINE + "Write kernel parameters for GPU, NCCL and RDMA workloads [net.ipv4.conf.all.arp_ignore]",), "running: 0"),
    Mutation(GPU_NODE, "package", ("apt-get", "remove", "-y", "-qq", "jq"), (BASELINE + "Install base packages",)),
    # A stopped daemon runs no older configuration: only its start reports.
    Mutation(GPU_NODE, "service state", ("systemctl", "stop", "chrony"), (BASELINE + "Enable and start chrony",)),
    Mutation(GPU_NODE, "file", sh("echo 'server 127.0.0.9 iburst' >> /etc/chrony/chrony.conf"),
             (BASELINE + "Configure chrony",), "127.0.0.9"),
    Mutation(GPU_NODE, "file mode", ("chmod", "0666", "/etc/security/limits.d/90-gpufleet-baseline.conf"),
             (BASELINE + "Set memlock and nofile limits for login sessions",)),
    Mutation(GPU_NODE, "service state", ("systemctl", "stop", "prometheus-node-exporter"),
             (MONITORING + "Enable and start node_exporter",)),
    Mutation(GPU_NODE, "service state", ("systemctl", "stop", "gpufleet-guard"),
             (NODE_UNITS + "Enable and start the program [gpufleet-guard.service]",)),
    # A hole made in the running firewall: the file and the table's comment
    # stay as the role wrote them.
    Mutation(GPU_NODE, "kernel firewall",
             ("nft", "add", "rule", "inet", "gpufleet", "input", "tcp", "dport", "4444", "accept"),
             (SECURITY + "Load the firewall ruleset atomically",), "4444"),
    # A pinned driver package released from its hold: a resource of the
    # internal _nvidia_packages role, which --fix reaches through the roles
    # that include it.
    Mutation(GPU_NODE, "package hold", ("apt-mark", "unhold", "libnvidia-ml1"),
             (NVIDIA_PACKAGES + "Hold the pinned packages against upgrades [libnvidia-ml1]",)),
    # The same class through another role's inclusion (nccl's package).
    Mutation(GPU_NODE, "package hold", ("apt-mark", "unhold", "libnccl2"),
             (NVIDIA_PACKAGES + "Hold the pinned packages against upgrades [libnccl2]",)),
    # Users taken out of a group that site.yml put them in (docker_users):
    # the account databases change, no file the roles write.
    Mutation(GPU_NODE, "group membership", ("gpasswd", "--delete", "trainer", "docker"),
             (DOCKER + "Add the users to the docker group [trainer]",)),
    Mutation(GPU_NODE, "group membership", ("gpasswd", "--delete", "gpufleet", "docker"),
             (DOCKER + "Add the users to the docker group [gpufleet]",)),
    # Members added that docker_users does not list: the docker group is
    # root on the node, so it holds docker_users and no one else.
    Mutation(GPU_NODE, "group membership", ("gpasswd", "--add", "nobody", "docker"),
             (DOCKER + "Remove the members docker_users does not list from the docker group [nobody]",)),
    Mutation(GPU_NODE, "group membership", ("gpasswd", "--add", "daemon", "docker"),
             (DOCKER + "Remove the members docker_users does not list from the docker group [daemon]",)),
    # Packaged files written over, as NVIDIA's .run installer does to the
    # driver's libraries: dpkg's database still says installed.
    Mutation(GPU_NODE, "packaged files",
             sh("f=$(dpkg -L libnvidia-ml1 | grep -E '/libnvidia-ml[.]so[.][0-9]+[.]' | head -n 1)"
                " && test -f \"$f\" && echo tampered >> \"$f\""),
             (NVIDIA_PACKAGES + "Verify the pinned packages' files against dpkg's checksums",), "libnvidia-ml1: /usr/lib/"),
    Mutation(GPU_NODE, "packaged files", sh("echo tampered >> /usr/bin/prometheus-node-exporter"),
             (MONITORING + "Verify node_exporter's files against dpkg's checksums",),
             "/usr/bin/prometheus-node-exporter (checksum differs)"),
    # sshd lines outside the role's drop-in that win over it: one read first
    # (a drop-in that sorts earlier), one in a Match block. This node keeps
    # the default (security_sshd_overrides: disable): --fix comments each
    # out where it is. Before the running-configuration rows, since sshd is
    # restarted here to run them.
    Mutation(PLAIN_NODE, "sshd override",
             sh("printf 'ClientAliveCountMax 7\\nPermitRootLogin yes\\n' > /etc/ssh/sshd_config.d/00-aa-image.conf"
                " && systemctl restart ssh"),
             (SECURITY + "Disable the sshd settings that override the hardening",), "PermitRootLogin yes"),
    Mutation(PLAIN_NODE, "sshd override",
             sh("printf 'Match Address 10.9.0.0/16\\n    PasswordAuthentication yes\\n' >> /etc/ssh/sshd_config"
                " && systemctl restart ssh"),
             (SECURITY + "Disable the sshd settings that override the hardening",), "Match Address 10.9.0.0/16"),
    # Running configuration against written configuration: each file ends
    # as the role wrote it, while the daemon runs something else. The file
    # is put back a second after the start, as a person would: a change
    # within 50 ms of the start is within the clocks' resolution, and not
    # taken for a later one (service_config's _SLACK_S).
    Mutation(PLAIN_NODE, "running configuration",
             # sshd allowed passwords when it started; its file says no again.
             sh("f=/etc/ssh/sshd_config.d/00-gpufleet-security.conf && cp -p $f /tmp/sshd.conf"
                " && sed -i 's/^PasswordAuthentication no/PasswordAuthentication yes/' $f"
                " && systemctl restart ssh && sleep 1 && cat /tmp/sshd.conf > $f"),
             (SECURITY + "Check that sshd runs its current configuration",), "00-gpufleet-security.conf"),
    Mutation(PLAIN_NODE, "running configuration",
             # Started with other flags by a drop-in, which is gone again.
             sh("d=/etc/systemd/system/prometheus-node-exporter.service.d && mkdir -p $d"
                " && printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/prometheus-node-exporter $ARGS"
                " --no-collector.hwmon\\n' > $d/by-hand.conf"
                " && systemctl daemon-reload && systemctl restart prometheus-node-exporter"
                " && rm $d/by-hand.conf && systemctl daemon-reload"),
             (MONITORING + "Check that node_exporter runs its current configuration",), "--no-collector.hwmon"),
    Mutation(PLAIN_NODE, "running configuration",
             # chronyd polls a server its file no longer lists.
             sh("cp /etc/chrony/chrony.conf /tmp/chrony.conf && echo 'server 127.0.0.8 iburst' >> /etc/chrony/chrony.conf"
                " && systemctl restart chrony && sleep 1 && cat /tmp/chrony.conf > /etc/chrony/chrony.conf"),
             (BASELINE + "Check that chrony runs its current configuration",), "/etc/chrony/chrony.conf"),
    Mutation(PLAIN_NODE, "running configuration",
             # The guard restarted by hand with another interpreter flag,
             # from a runtime drop-in that is gone again.
             sh("d=/run/systemd/system/gpufleet-guard.service.d && mkdir -p $d"
                " && printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/python3 -X dev"
                " /usr/local/lib/gpufleet/guard/gpufleet_guard.py --config /etc/gpufleet/guard/config.json\\n'"
                " > $d/by-hand.conf && systemctl daemon-reload && systemctl restart gpufleet-guard"
                " && rm $d/by-hand.conf && systemctl daemon-reload"),
             (GUARD + "Check that the guard runs its current code and configuration",), "-X"),
    # Drop-ins that override what a managed unit's own file sets: the files
    # the roles write are untouched, systemd runs something else. --fix
    # moves each aside (kept as NAME.gpufleet-disabled) and restarts the unit.
    Mutation(PLAIN_NODE, "unit drop-in",
             sh("d=/etc/systemd/system/gpufleet-backup.timer.d && mkdir -p $d"
                " && printf '[Timer]\\nOnUnitActiveSec=\\nOnCalendar=weekly\\n' > $d/weekly.conf"
                " && systemctl daemon-reload"),
             (NODE_UNITS + "Move aside the drop-ins that override the program's units [gpufleet-backup.timer]",),
             # What systemd runs: the reset dropped the 10-minute timer.
             "TimersCalendar={ OnCalendar=Mon"),
    Mutation(GPU_NODE, "unit drop-in",
             sh("d=/etc/systemd/system/prometheus-node-exporter.service.d && mkdir -p $d"
                " && printf '[Service]\\nExecStart=\\nExecStart=/usr/bin/prometheus-node-exporter"
                " --collector.disable-defaults\\n' > $d/50-local.conf && systemctl daemon-reload"),
             (MONITORING + "Move aside the drop-ins that override node_exporter",), "--collector.disable-defaults"),
    # Managed units masked while they run: nothing changes until the next
    # boot, when they would not start. --fix unmasks them.
    Mutation(PLAIN_NODE, "masked unit", ("systemctl", "mask", "chrony"), (BASELINE + "Enable and start chrony",),
             "UnitFileState=masked"),
    Mutation(PLAIN_NODE, "masked unit", ("systemctl", "mask", "prometheus-node-exporter"),
             (MONITORING + "Enable and start node_exporter",)),
    Mutation(GPU_NODE, "masked unit", ("systemctl", "mask", "nvidia-persistenced"),
             ("gpufleet.cloud.nvidia_driver : Enable the persistence daemon",), "UnitFileState=masked"),
    # Options on sshd's command line, which sshd -T never shows.
    Mutation(PLAIN_NODE, "unit drop-in",
             sh("d=/etc/systemd/system/ssh.service.d && mkdir -p $d"
                " && printf '[Service]\\nEnvironment=\"SSHD_OPTS=-oPermitRootLogin=yes\"\\n' > $d/50-opts.conf"
                " && systemctl daemon-reload"),
             (SECURITY + "Move aside the ssh.service drop-ins that give sshd other options",), "PermitRootLogin=yes"),
    # systemctl edit --full: a whole unit file in place of the package's,
    # loading another ruleset at boot.
    Mutation(PLAIN_NODE, "unit file in place of the package's",
             sh("cp \"$(systemctl show -p FragmentPath --value nftables)\" /etc/systemd/system/nftables.service"
                " && sed -i 's#^ExecStart=.*#ExecStart=/usr/sbin/nft -f /etc/nftables-local.conf#'"
                " /etc/systemd/system/nftables.service && systemctl daemon-reload"),
             (SECURITY + "Move aside the drop-ins that override nftables.service",), "nftables-local.conf"),
    Mutation(PLAIN_NODE, "package", ("apt-get", "remove", "-y", "-qq", "numactl"), (BASELINE + "Install base packages",)),
    # A secret's file made readable by all: its mode is no secret, so the
    # record shows the modes found and wanted, not "<redacted: no_log>"
    # (docs/drift.md, "Secrets"); the content task stays in sync.
    Mutation(PLAIN_NODE, "secret file's mode", ("chmod", "0644", "/etc/gpufleet/backup/restic.env"),
             (BACKUP + "Restrict the repository environment file to root",), "0644"),
    # The running firewall's chain opened by its policy, not by a rule.
    Mutation(PLAIN_NODE, "kernel firewall", ("nft", "chain", "inet", "gpufleet", "input", "{ policy accept ; }"),
             (SECURITY + "Load the firewall ruleset atomically",), "policy accept"),
    # Timers stopped in systemd, their unit files untouched: one still
    # enabled for boot, one disabled too.
    Mutation(PLAIN_NODE, "timer", ("systemctl", "stop", "gpufleet-backup-prune.timer"),
             (NODE_UNITS + "Enable and start the program [gpufleet-backup-prune.timer]",)),
    Mutation(PLAIN_NODE, "timer", ("systemctl", "disable", "--now", "gpufleet-health.timer"),
             (NODE_UNITS + "Enable and start the program [gpufleet-health.timer]",), "UnitFileState=disabled"),
)
EXPECTED_DRIFT = {(m.host, resource) for m in MUTATIONS if not m.blocker for resource in m.flags}
BLOCKED = {(m.host, resource) for m in MUTATIONS if m.blocker for resource in m.flags}


def main_argv(host, unit):
    """The command line of the unit's main process on ``host``."""
    return node_exec(host, "sh", "-c", f"tr '\\0' ' ' < /proc/$(systemctl show -p MainPID --value {unit})/cmdline")


PLAIN, GPU = lab_container(PLAIN_NODE), lab_container(GPU_NODE)


def drift(tmp_path, name, *extra):
    out = tmp_path / name
    result = gpufleet("drift", "-i", "inventories/lab", "--output-dir", str(out), "--quiet",
                      "--history", str(tmp_path / "history.jsonl"), *extra)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    return result, report, out


def lab_status(name):
    """`gpufleet lab status` of one node, as "state=... ssh=..."."""
    for row in gpufleet("lab", "status").stdout.splitlines():
        fields = row.split()
        if fields and fields[0] == name:
            return f"state={fields[2]} ssh={fields[4]}"
    return "absent"


def role_of(resource):
    """The grid column of a resource: "gpufleet.cloud.baseline : ..." is baseline."""
    return resource.split(" : ", 1)[0].rsplit(".", 1)[-1]


def not_in_sync(report):
    return {(r["host"], r["resource"]) for r in report["records"] if r["state"] != "in-sync"}


@pytest.fixture(scope="module")
def converged(first_converge):
    """The session's fleet (a plain node and a GPU-stack node, LAB_UP),
    converged by its first converge (tests/integration/conftest.py)."""
    for run in (first_converge.first, first_converge.second):
        assert run.returncode == 0, run.stdout[-3000:]


def test_a_converged_fleet_is_clean(converged, first_converge):
    # The session's clean scan, made right after the converge
    # (tests/integration/conftest.py).
    result, report = first_converge.scan, first_converge.report
    assert result.returncode == 0 and report, result.stdout + result.stderr
    assert report["summary"]["in_sync_percent"] == 100.0
    assert report["summary"]["coverage_percent"] == 100.0
    assert report["summary"]["states"].get("in-sync", 0) > 0
    assert set(report["hosts"]) == set(LAB_HOSTS)
    # The lab's two nodes are not peers (Debian 12 without GPUs, Debian 13
    # with the GPU stack): their differences are by design, not flagged.
    assert report["peers"] == [] and "peer-mismatch" not in result.stdout, result.stdout
    assert {report["hosts"][h]["os"] for h in LAB_HOSTS} == {"Debian 12", "Debian 13"}
    # The node view of GPU faults rides along (not drift: the figures above
    # are in sync): node_health's report where its timer has run yet, and
    # no repairs file, as the lab's guard has repair off.
    doctors = {h: report["hosts"][h]["doctor"] for h in LAB_HOSTS}
    assert {d["health"]["state"] for d in doctors.values()} <= {"read", "absent"}, doctors
    assert {d["repairs"]["state"] for d in doctors.values()} == {"absent"}, doctors


def test_prometheus_scrapes_every_lab_node(converged, tmp_path):
    # A real Prometheus on this machine scrapes each node's exporter on the
    # node's own address, as a fleet's Prometheus would: through the
    # firewall, which admits only security_monitoring_cidrs (the host's
    # bridge address, in the lab).
    targets = {}
    for host in LAB_HOSTS:
        node = lab_container(host)
        address = subprocess.run(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", node],
                                 capture_output=True, text=True, check=True).stdout.strip()
        targets[host] = f"{address}:9100"
        # A backup and a health check now, so their metrics exist: their
        # timers' first runs come a minute or more after the converge.
        for unit in ("gpufleet-backup.service", "gpufleet-health.service"):
            started = node_exec(node, "systemctl", "start", unit)
            assert started.returncode == 0, f"{node} {unit}: {started.stderr}"
    with serve(tmp_path, "lab", list(targets.values())) as prometheus:
        for target in targets.values():
            assert prometheus.query(f'node_uname_info{{instance="{target}"}}'), target
            # The textfile collector serves what the other roles write.
            for metric, labels, condition in (
                ("gpufleet_backup_last_run_success", "", "== 1"),
                ("gpufleet_backup_snapshots", "", ">= 1"),
                ("gpufleet_health_check", 'check="gpu_count",result="pass",', "== 1"),
                # site.yml's guard, its spot trigger off: the lab's nodes are on demand.
                ("gpufleet_guard_spot_state", 'state="off",', "== 1"),
            ):
                expr = f'{metric}{{{labels}instance="{target}"}} {condition}'
                assert prometheus.query(expr), f"{expr} is not true"


def test_guard_status_shows_every_lab_node(converged):
    # The fleet view of site.yml's guard, as a user runs it.
    done = gpufleet("guard", "status", "-i", "inventories/lab", "--format", "json", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = {node["host"]: node for node in json.loads(done.stdout)["nodes"]}
    for host in LAB_HOSTS:
        assert nodes[host]["state"] == "reporting" and nodes[host]["spot"] == "off", nodes[host]
        assert nodes[host]["last_poll_at"] is not None and nodes[host]["capped"] is False, nodes[host]
        # The lab's cloud is Alibaba's, whose maintenance events the guard does not read yet: said, not "clear".
        assert nodes[host]["maintenance"] == "not_read", nodes[host]


def test_the_gpu_stack_node_took_the_gpu_play(converged):
    node = GPU
    assert node_exec(node, "systemctl", "is-active", "docker").stdout.strip() == "active"
    daemon = json.loads(node_exec(node, "cat", "/etc/docker/daemon.json").stdout)
    assert daemon["log-opts"]["max-size"] == "100m"
    assert "NCCL_SOCKET_IFNAME=eth0" in node_exec(node, "cat", "/etc/nccl.conf").stdout
    assert node_exec(PLAIN, "test", "-e", "/etc/nccl.conf").returncode == 1, PLAIN
    # Its own network namespace's kernel parameters run as the file says;
    # the host's (vm.*) are only in the file.
    assert node_exec(node, "sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split() == ["4096", "87380", "134217728"]
    assert node_exec(node, "grep", "-x", "vm.zone_reclaim_mode=0", "/etc/sysctl.d/90-gpufleet-baseline.conf").returncode == 0


def test_the_gpu_stack_node_passes_its_roles_molecule_checks(converged):
    """The nvidia_driver and cuda scenarios converge Debian 12 only; this
    node is their Debian 13, converged by site.yml with the scenarios'
    sources and the open modules (inventories/lab). Their testinfra checks
    run here unchanged, against what site.yml left on the node
    (docs/testing.md, "One release per scenario where the lab has the
    other")."""
    tests = [f"extensions/molecule/{role}/tests" for role in ("nvidia_driver", "cuda")]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--hosts",
                             f"podman://{GPU}", *tests], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # Every check ran: none was skipped or deselected on this node.
    summary = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in [\d.]+s( \([\d:]+\))?", summary), summary


def test_hand_made_drift_is_found_exactly_then_fixed(converged, tmp_path):
    for mutation in MUTATIONS:
        assert node_exec(lab_container(mutation.host), *mutation.argv).returncode == 0, mutation
    # The running-configuration rows change what runs, not only a file.
    assert "127.0.0.8" in node_exec(PLAIN, "chronyc", "-n", "sources").stdout
    exporter = main_argv(PLAIN, "prometheus-node-exporter")
    assert "--no-collector.hwmon" in exporter.stdout, exporter
    assert "policy accept" in node_exec(PLAIN, "nft", "list", "chain", "inet", "gpufleet", "input").stdout

    # One `drift --fix --yes` is the whole cycle: its first scan finds the
    # drift (its reports land in out/), it converges only what drifted, and
    # its second scan (out/after-fix/) must find the fleet clean. A separate
    # scan before and after would repeat both fleet-wide scans.
    try:
        result, report, out = drift(tmp_path, "fix", "--fix", "--yes")
    finally:
        # The fleet is the session's: the blocker goes, whatever happened.
        node_exec(GPU, "sh", "-c", "rm -f /etc/ssh/sshd_config.d/00-aaa-local.conf && systemctl restart ssh")
    assert report, result.stdout + result.stderr
    # The blocker's failure hides nothing: every row is reported by the scan
    # that failed there, with a coverage of every resource it read.
    assert report["summary"]["exit_code"] == 2 | 4, report["summary"]
    assert not_in_sync(report) == EXPECTED_DRIFT | BLOCKED
    assert {(r["host"], r["resource"]) for r in report["records"] if r["state"] == "failed"} == BLOCKED
    assert report["summary"]["not_scanned"] == {}
    for mutation in MUTATIONS:
        if mutation.shows:
            record = next(r for r in report["records"]
                          if r["host"] == mutation.host and r["resource"] == mutation.flags[0])
            seen = record["message"] if mutation.blocker else json.dumps(record["diff"])
            assert mutation.shows in seen, f"{mutation}: the record shows the hand-made change"
    table = result.stdout.split("\n\n")[0]
    assert all(host in table for host in LAB_HOSTS), table
    # The first scan's summary line says what a plain scan would exit with.
    assert "exit 6" in result.stdout.split("fix: converge")[0]
    # Only the drifted nodes are converged, and the internal role's
    # resources are reached through the roles that include it.
    fixed = next(line for line in result.stdout.splitlines() if line.startswith("fix: converge "))
    assert fixed.startswith(f"fix: converge {', '.join(LAB_HOSTS)} for "), fixed
    assert "nvidia_driver" in fixed.split(" for ", 1)[1].split(", "), fixed

    # JUnit: each node's suite has its own failures (drift) and errors (failed checks).
    junit = (out / "report.xml").read_text()
    for host in LAB_HOSTS:
        failures = sum(1 for h, _r in EXPECTED_DRIFT if h == host)
        errors = sum(1 for h, _r in BLOCKED if h == host)
        assert re.search(rf'name="{host}" tests="\d+" failures="{failures}" errors="{errors}"', junit), (host, failures)

    # The HTML report, as a person sees it in a browser.
    browser = shutil.which("chromium")
    assert browser, "chromium is not installed (tools/host-setup.sh installs it)"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"]
    page = f"file://{out / 'report.html'}"
    shot = ROOT / ".cache" / "drift-report.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 10_000
    dom = subprocess.run([browser, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert f"Drifted: {', '.join(LAB_HOSTS)}</p>" in dom
    assert f"Failed checks: {GPU_NODE}</p>" in dom
    assert ">0%</b>nodes in sync" in dom
    # The hosts x roles grid: each node's row marks drifted exactly the roles
    # of its hand-made drift, and no other cell is out of sync (the grid's
    # columns are the records' roles, the prefix Ansible gives a role's task
    # names: "gpufleet.cloud.baseline : ..." is column baseline). Its
    # section lists those resources, with diffs.
    from tests.unit.gpufleet.drift.helpers import Page

    shown = Page(dom)
    assert sorted(shown.rows) == sorted(LAB_HOSTS), shown.rows
    for host in LAB_HOSTS:
        resources = {resource for h, resource in EXPECTED_DRIFT | BLOCKED if h == host}
        # A cell shows its role's worst record: failed over drifted.
        want = {**{role_of(r): "drifted" for h, r in EXPECTED_DRIFT if h == host},
                **{role_of(r): "failed" for h, r in BLOCKED if h == host}}
        out_of_sync = {role: state for (h, role), state in shown.cells.items()
                       if h == host and state not in ("in-sync", "none")}
        assert out_of_sync == want, (host, out_of_sync)
        section = shown.sections[host]
        assert all(resource in section.text for resource in resources), (host, section.text[:3000])
        assert section.diffs, f"{host}: its section shows its drifted resources' diffs"
    assert set(shown.links) <= set(shown.ids), "every grid link goes to a host's section"

    # After the one fix: every row but the blocker is repaired, and the
    # second scan names only the blocker. The converge failed there, which
    # the exit code says (4), and so does the fix's record, with the reason.
    # stderr: the fix run's progress, where each failed task is named with its reason.
    after = json.loads((out / "after-fix" / "report.json").read_text())
    assert after["summary"]["exit_code"] == 4 and not_in_sync(after) == BLOCKED, (
        sorted(not_in_sync(after)), "\n".join(line for line in result.stderr.splitlines() if "failed:" in line))
    assert result.returncode == 4, result.stdout[-3000:]
    assert set(after["hosts"]) == set(LAB_HOSTS)
    fix = after["fix"]
    assert fix["converge_rc"] != 0
    assert {(r["host"], r["resource"]) for r in fix["repaired"]} == EXPECTED_DRIFT
    assert [(r["host"], r["resource"]) for r in fix["not_repaired"]] == sorted(BLOCKED)
    assert "00-aaa-local.conf" in fix["not_repaired"][0]["why"], fix["not_repaired"]
    assert f"fix: repaired {len(EXPECTED_DRIFT)} of {len(EXPECTED_DRIFT | BLOCKED)} " in result.stdout
    # The kernel runs the file's table again: the hole is closed; the hold
    # is back; the packaged files are the package's again; the daemons run
    # their files' configuration.
    node = GPU
    assert "4444" not in node_exec(node, "nft", "list", "table", "inet", "gpufleet").stdout
    dockerd = main_argv(node, "docker")
    assert dockerd.stdout.split() == ["/usr/sbin/dockerd", "-H", "fd://", "--containerd=/run/containerd/containerd.sock"], dockerd
    assert node_exec(PLAIN, "dpkg-query", "-W", "-f", "${Status}", "numactl").stdout == "install ok installed"
    for key, value in (("net.ipv4.tcp_mtu_probing", "1"), ("net.ipv4.conf.all.arp_ignore", "1")):
        assert node_exec(node, "sysctl", "-n", key).stdout.strip() == value, key
    for user in ("trainer", "gpufleet"):
        assert "docker" in node_exec(node, "id", "-nG", user).stdout.split(), user
    members = node_exec(node, "getent", "group", "docker").stdout.strip().rsplit(":", 1)[1]
    assert sorted(members.split(",")) == ["gpufleet", "trainer"], members
    held = node_exec(node, "apt-mark", "showhold").stdout.split()
    assert "libnvidia-ml1" in held and "libnccl2" in held, held
    assert "policy drop" in node_exec(PLAIN, "nft", "list", "chain", "inet", "gpufleet", "input").stdout
    for unit in ("chrony", "prometheus-node-exporter"):
        assert node_exec(PLAIN, "systemctl", "is-enabled", unit).stdout.strip() == "enabled", unit
    # The overriding drop-ins are moved aside, where an operator finds them,
    # and the units run without them.
    for name, dropin in ((PLAIN, "/etc/systemd/system/gpufleet-backup.timer.d/weekly.conf"),
                         (GPU, "/etc/systemd/system/prometheus-node-exporter.service.d/50-local.conf"),
                         (PLAIN, "/etc/systemd/system/ssh.service.d/50-opts.conf"),
                         (PLAIN, "/etc/systemd/system/nftables.service")):
        assert node_exec(name, "test", "-e", dropin).returncode == 1, dropin
        assert node_exec(name, "test", "-f", dropin + ".gpufleet-disabled").returncode == 0, dropin
    assert "weekly" not in node_exec(PLAIN, "systemctl", "cat", "gpufleet-backup.timer").stdout
    assert "--collector.disable-defaults" not in main_argv(GPU, "prometheus-node-exporter").stdout
    assert "PermitRootLogin" not in main_argv(PLAIN, "ssh").stdout
    assert "nftables-local.conf" not in node_exec(PLAIN, "systemctl", "cat", "nftables").stdout
    assert node_exec(GPU, "systemctl", "is-enabled", "nvidia-persistenced").stdout.strip() == "enabled"
    for name, timer in ((PLAIN, "gpufleet-backup-prune.timer"), (PLAIN, "gpufleet-health.timer")):
        assert node_exec(name, "systemctl", "is-active", timer).stdout.strip() == "active", (name, timer)
        assert node_exec(name, "systemctl", "is-enabled", timer).stdout.strip() == "enabled", (name, timer)
    for package in ("libnvidia-ml1", "prometheus-node-exporter"):
        verify = node_exec(node, "dpkg", "--verify", package)
        # Conffiles aside: the monitoring role writes node_exporter's defaults.
        changed = [line for line in verify.stdout.splitlines() if line[10:11] != "c"]
        assert verify.returncode == 0 and changed == [], f"{package}: {verify.stdout}"
    sources = node_exec(PLAIN, "chronyc", "-n", "sources").stdout
    # On failure, which chronyd answered: systemd's, or one it no longer tracks.
    assert "127.0.0.8" not in sources, (sources, node_exec(PLAIN, "pgrep", "-a", "chronyd").stdout,
                                        node_exec(PLAIN, "systemctl", "show", "-p", "MainPID", "chrony").stdout)
    assert node_exec(PLAIN, "stat", "-c", "%a %U", "/etc/gpufleet/backup/restic.env").stdout.strip() == "600 root"
    # The sshd lines that won over the hardening are commented out where
    # they were, their text kept; the image's other setting stays.
    assert node_exec(PLAIN, "cat", "/etc/ssh/sshd_config.d/00-aa-image.conf").stdout == (
        "ClientAliveCountMax 7\n# gpufleet-disabled (it overrode the security role's hardening): PermitRootLogin yes\n")
    sshd = node_exec(PLAIN, "sshd", "-T").stdout.splitlines()
    assert "permitrootlogin no" in sshd and "clientalivecountmax 7" in sshd, sshd
    matched = node_exec(PLAIN, "sshd", "-T", "-C", "user=trainer,host=peer,addr=10.9.1.1").stdout.splitlines()
    assert "passwordauthentication no" in matched, matched
    exporter = main_argv(PLAIN, "prometheus-node-exporter")
    assert "--no-collector.hwmon" not in exporter.stdout, exporter
    # History has both scans, the drifted one first.
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [run["exit_code"] for run in history] == [6, 4], history
    assert len(history[0]["drifted"]) == len(EXPECTED_DRIFT) and history[1]["drifted"] == []


def test_any_subset_of_roles_scans_and_fixes_the_gpu_stack_node(converged, tmp_path):
    # The subsets that cross site.yml's plays on the GPU-stack node: the
    # health gate after the GPU stack reads node_health's result, which a
    # run limited to one of its roles must still produce. The driver role
    # alone is also a --fix: a drift in it alone, scanned and converged with
    # --tags nvidia_driver (the structure for every tag:
    # tests/unit/playbooks/test_site.py).
    hold = (GPU_NODE, NVIDIA_PACKAGES + "Hold the pinned packages against upgrades [libnvidia-ml1]")
    assert node_exec(GPU, "apt-mark", "unhold", "libnvidia-ml1").returncode == 0
    result, report, out = drift(tmp_path, "driver", "--limit", GPU_NODE, "--tags", "nvidia_driver", "--fix", "--yes")
    assert report and not_in_sync(report) == {hold}, (result.stdout[-3000:], result.stderr[-3000:])
    assert f"fix: converge {GPU_NODE} for nvidia_driver" in result.stdout
    after = json.loads((out / "after-fix" / "report.json").read_text())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert after["fix"]["converge_rc"] == 0 and after["fix"]["repaired"] == [{"host": hold[0], "resource": hold[1]}]
    assert not_in_sync(after) == set() and set(after["hosts"]) == {GPU_NODE}
    assert "libnvidia-ml1" in node_exec(GPU, "apt-mark", "showhold").stdout.split()
    for tags in ("cuda", "node_health"):
        result, report, _out = drift(tmp_path, tags, "--limit", GPU_NODE, "--tags", tags)
        assert result.returncode == 0 and report, (tags, result.stdout[-3000:], result.stderr[-3000:])
        roles = {r["role"].rsplit(".", 1)[-1] for r in report["records"] if r.get("role")}
        assert tags in roles and set(report["hosts"]) == {GPU_NODE}, (tags, roles)


RESTIC = "set -a; . /etc/gpufleet/backup/restic.env; set +a; restic --no-cache"


def test_a_second_lab_up_keeps_every_backup(converged, tmp_path):
    # `gpufleet lab up` on a running lab restarts its object store. Its
    # data must survive that: a backup made before is restored after.
    node = PLAIN
    assert node_exec(node, "systemctl", "start", "gpufleet-backup.service").returncode == 0
    before = node_exec(node, "sh", "-c", f"{RESTIC} snapshots --json")
    assert before.returncode == 0, before.stderr
    snapshots = sorted(s["id"] for s in json.loads(before.stdout))
    assert snapshots, "the backup made a snapshot"

    up = gpufleet("lab", "up", *LAB_UP)
    if up.returncode != 0:
        # The fleet is removed at the session's end: keep what its nodes say.
        for name in map(lab_container, LAB_HOSTS):
            for argv in (["systemctl", "list-jobs"], ["systemctl", "--failed"], ["journalctl", "-n", "40", "--no-pager"]):
                seen = node_exec(name, *argv)
                print(f"== {name}: {' '.join(argv)} (rc {seen.returncode})\n{seen.stdout}{seen.stderr}")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "its data restored" in up.stdout, up.stdout

    after = node_exec(node, "sh", "-c", f"{RESTIC} snapshots --json")
    assert after.returncode == 0, after.stderr
    assert sorted(s["id"] for s in json.loads(after.stdout)) == snapshots
    restored = node_exec(node, "sh", "-c", f"{RESTIC} restore {snapshots[-1]} --target /tmp/restore-check"
                         " --include /etc/hostname")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert node_exec(node, "cat", "/tmp/restore-check/etc/hostname").stdout == \
        node_exec(node, "cat", "/etc/hostname").stdout
    node_exec(node, "rm", "-rf", "/tmp/restore-check")
    # That the second `lab up` made no drift on the untouched nodes is the
    # next test's scan: the plain node must be all in sync there.


def test_an_unreachable_node_is_reported_and_the_others_still_are(converged, first_converge, tmp_path):
    # What each node reports when reachable: the session's clean scan (the
    # hand-made drift test before this one fixes what it broke, and its
    # last scan proves the fleet clean again). This scan comes after the
    # second `lab up` (the test before), so it also proves that the lab's
    # restart made no drift on the nodes nobody touched.
    clean = first_converge.report
    per_host = {h: sum(1 for r in clean["records"] if r["host"] == h) for h in clean["hosts"]}
    subprocess.run(["podman", "stop", "-t", "2", GPU], check=True, capture_output=True)
    try:
        result, report, _out = drift(tmp_path, "down")
    finally:
        subprocess.run(["podman", "start", GPU], check=True, capture_output=True)
        # The fleet is the session's: leave it as it was, booted and on SSH.
        wait_for(lambda: "ssh=up" in lab_status(GPU), f"{GPU} up again with ssh", 120)
    assert result.returncode & 8, result.stdout
    assert result.returncode == 8, "only the unreachable bit: nothing drifted or failed"
    assert report["hosts"][GPU_NODE]["state"] == "unreachable"
    records = [r for r in report["records"] if r["host"] == PLAIN_NODE]
    assert len(records) == per_host[PLAIN_NODE] and all(r["state"] == "in-sync" for r in records)
