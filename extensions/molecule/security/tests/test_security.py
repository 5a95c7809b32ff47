"""What a node converged by gpufleet.cloud.security really does: sshd and
the firewall are tried for real from network namespaces the tests make
inside the node, never from or towards any other address."""

from __future__ import annotations

import re

import pytest
from conftest import (
    ansible_playbook,
    assert_dropin_moved_aside,
    assert_file,
    assert_package,
    assert_unit_running,
    debian_major,
)

DROPIN = "/etc/ssh/sshd_config.d/00-gpufleet-security.conf"
# Mirrors the scenario's molecule.yml: an allowed and a denied source network.
NETNS = {"ok": 1, "no": 2}
PROBE = """
import socket, sys
addr, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
s.settimeout(timeout)
try:
    s.connect((addr, port))
    print("open")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
"""
ROLE_PLAY = """
- hosts: all
  gather_facts: true
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.cloud.security
        tasks_from: %s
"""


def node_addr(ns: str, family: int) -> str:
    """The node's end of a namespace's link."""
    return f"10.231.{NETNS[ns]}.1" if family == 4 else f"fd00:231:{NETNS[ns]}::1"


def probe(host, ns: str, family: int, port: int) -> str:
    """Connect from a namespace to the node: open, refused or timeout."""
    out = host.run("ip netns exec gft-%s python3 -c %s %s %s 3", ns, PROBE, node_addr(ns, family), str(port))
    assert out.rc == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def namespaces(host):
    """Two namespaces linked to the node by veth pairs, one inside the
    allowlists and one outside; removed afterwards."""
    for ns, net in NETNS.items():
        script = f"""set -e
ip netns add gft-{ns}
ip link add gft-{ns}-h type veth peer name gft-{ns}-n
ip link set gft-{ns}-n netns gft-{ns}
ip addr add 10.231.{net}.1/30 dev gft-{ns}-h
ip -6 addr add fd00:231:{net}::1/64 dev gft-{ns}-h nodad
ip link set gft-{ns}-h up
ip -n gft-{ns} addr add 10.231.{net}.2/30 dev gft-{ns}-n
ip -n gft-{ns} -6 addr add fd00:231:{net}::2/64 dev gft-{ns}-n nodad
ip -n gft-{ns} link set gft-{ns}-n up
ip -n gft-{ns} link set lo up
"""
        host.run_test("sh -c %s", script)
    yield
    for ns in NETNS:
        host.run("ip netns del gft-%s", ns)


@pytest.fixture
def listener():
    """Start a TCP listener on all addresses of a node; stopped afterwards."""
    started = []

    def start(host, port: int):
        unit = f"gft-listen-{port}"
        host.run_test("systemd-run --unit %s python3 -m http.server --bind :: %s", unit, str(port))
        started.append((host, unit))
        host.run_test("timeout 10 sh -c %s", f"until ss -Hltn 'sport = :{port}' | grep -q .; do sleep 0.2; done")

    yield start
    for host, unit in started:
        host.run("systemctl stop %s", unit)


def denied(host) -> str:
    # debian13 runs with security_firewall_deny: reject, debian12 with drop.
    return "refused" if debian_major(host) == 13 else "timeout"


def test_packages(host):
    assert_package(host, "nftables")
    assert_package(host, "openssh-server")


def test_sshd_dropin_sorts_first_and_is_hardened(host):
    assert_file(
        host,
        DROPIN,
        contains=("PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin no", "AllowGroups sshusers"),
    )
    # Before any name an image or a tool usually gives (prepare.yml's
    # 00-aaa-image.conf is chosen to sort earlier still).
    dropins = sorted(set(host.file("/etc/ssh/sshd_config.d").listdir()) - {"00-aaa-image.conf"})
    assert dropins[0] == "00-gpufleet-security.conf", dropins


def test_lines_that_won_over_the_dropin_are_commented_out_and_kept(host):
    """prepare.yml's three winning lines: a drop-in that sorts first, the
    file it includes, a Match block. Each is commented out where it was,
    its text kept after the marker; the drop-in's other setting stays."""
    marker = "# gpufleet-disabled (it overrode the security role's hardening): "
    assert host.file("/etc/ssh/sshd_config.d/00-aaa-image.conf").content_string == (
        "ClientAliveCountMax 7\n" + marker + "PasswordAuthentication yes\nInclude /etc/ssh/gft-included.conf\n")
    assert host.file("/etc/ssh/gft-included.conf").content_string == marker + "PermitRootLogin yes\n"
    assert "Match Address 10.9.0.0/16\n" + marker + "PasswordAuthentication yes\n" in \
        host.file("/etc/ssh/sshd_config").content_string
    effective = dict(line.split(" ", 1) for line in host.check_output("sshd -T").splitlines() if " " in line)
    assert effective["clientalivecountmax"] == "7"
    assert effective["permitrootlogin"] == "no"
    # The connections the Match block names get the hardened value too.
    matched = host.check_output("sshd -T -C user=gft,host=gft.example,addr=10.9.1.1")
    assert "passwordauthentication no" in matched.splitlines(), matched


def test_a_drop_in_that_gave_sshd_options_is_moved_aside_and_the_image_s_stays(host):
    """prepare.yml's ssh.service drop-in passed password logins on sshd's
    command line, where sshd -T never sees them; the image's host-key
    drop-in (ExecStartPre only) is no override and stays."""
    assert_dropin_moved_aside(host, "ssh.service", "50-image-opts.conf", "PasswordAuthentication=yes",
                              kept=["gpufleet-hostkeys.conf"])
    pid = host.check_output("systemctl show -p MainPID --value ssh")
    argv = host.file(f"/proc/{pid}/cmdline").content_string.split("\0")
    assert not [a for a in argv if a.startswith("-o")], argv


def test_sshd_runs_with_the_hardened_settings(host, major):
    effective = dict(line.split(" ", 1) for line in host.check_output("sshd -T").splitlines() if " " in line)
    assert effective["passwordauthentication"] == "no"
    assert effective["kbdinteractiveauthentication"] == "no"
    assert effective["permitrootlogin"] == "no"
    assert effective["allowgroups"] == "sshusers"
    assert effective["clientaliveinterval"] == "300"
    assert effective["ciphers"].split(",")[0] == "chacha20-poly1305@openssh.com"
    assert not {"aes128-cbc", "3des-cbc"} & set(effective["ciphers"].split(","))
    assert "hmac-sha1" not in effective["macs"].split(",")
    # OpenSSH 10 (Debian 13) gets ML-KEM first; 9.2 (Debian 12) cannot.
    kex = effective["kexalgorithms"].split(",")
    assert kex[0] == ("mlkem768x25519-sha256" if major == 13 else "sntrup761x25519-sha512@openssh.com")
    assert_unit_running(host, "ssh")


def test_sshd_rejects_a_password_login_for_real(host):
    """The same user and password log in to a control sshd that allows
    passwords, and are refused by the hardened one."""
    host.run_test("getent group sshusers || groupadd sshusers")
    host.run_test("id gft-pw || useradd --create-home --groups sshusers gft-pw")
    host.run_test("sh -c %s", "echo 'gft-pw:Corr3ct-Horse' | chpasswd")
    host.run_test("sh -c %s", "printf '#!/bin/sh\\necho Corr3ct-Horse\\n' > /tmp/gft-askpass; chmod 0755 /tmp/gft-askpass")
    host.run_test(
        "systemd-run --unit gft-sshd-control /usr/sbin/sshd -D -e -o ListenAddress=127.0.0.1:2299"
        " -o PasswordAuthentication=yes -o PidFile=none"
    )
    ssh = (
        "SSH_ASKPASS=/tmp/gft-askpass SSH_ASKPASS_REQUIRE=force timeout 20 ssh -p %s"
        " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o PubkeyAuthentication=no"
        " -o PreferredAuthentications=password,keyboard-interactive -o NumberOfPasswordPrompts=1"
        " -o ConnectTimeout=5 gft-pw@127.0.0.1 echo logged-in"
    )
    try:
        host.run_test("timeout 10 sh -c %s", "until ss -Hltn 'sport = :2299' | grep -q .; do sleep 0.2; done")
        control = host.run(ssh, "2299")
        assert control.rc == 0 and "logged-in" in control.stdout, control.stderr
        hardened = host.run(ssh, "22")
        assert hardened.rc == 255, hardened.stdout + hardened.stderr
        assert "Permission denied (publickey)" in hardened.stderr, hardened.stderr
    finally:
        host.run("systemctl stop gft-sshd-control")
        host.run("userdel --remove gft-pw")
        host.run("rm -f /tmp/gft-askpass")


def test_a_bad_sshd_change_is_refused_before_it_is_written(rerun_node, tmp_path):
    host = rerun_node
    before = host.file(DROPIN).content_string
    play = tmp_path / "sshd.yml"
    play.write_text(ROLE_PLAY % "main")
    # A keyword sshd does not know passes preflight's shape check; sshd -t
    # refuses it, so the drop-in on the node must stay as it was.
    result = ansible_playbook(
        play, host.backend.name, extra_vars={"security_sshd_options": {"NoSuchKeyword": "yes"}}
    )
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "Bad configuration option: NoSuchKeyword" in out or "Bad configuration option: nosuchkeyword" in out, out
    assert host.file(DROPIN).content_string == before
    assert not host.file(DROPIN).contains("NoSuchKeyword")
    assert_unit_running(host, "ssh")


def test_firewall_table_is_loaded_and_drops_by_default(host):
    table = host.check_output("nft list table inet gpufleet")
    assert "type filter hook input priority filter; policy drop;" in table
    assert "ct state established,related accept" in table
    assert re.search(r"ip saddr 10\.231\.1\.0/30 tcp dport 22 accept", table), table
    assert re.search(r"ip6 saddr fd00:231:1::/64 tcp dport 22 accept", table), table
    assert re.search(r"ip saddr 10\.231\.1\.0/30 tcp dport \{ 9100, 9400 \} accept", table), table
    # The live table carries the digest of the rules the file holds.
    digest = re.search(r'comment "([0-9a-f]{64})"', table).group(1)
    assert host.file("/etc/nftables.d/gpufleet.nft").contains(digest)
    assert host.service("nftables").is_enabled


FIREWALL_PLAY = """
- hosts: all
  gather_facts: true
  tasks:
    - ansible.builtin.package_facts:
    - ansible.builtin.include_role:
        name: gpufleet.cloud.security
        tasks_from: firewall
"""
LOAD_TASK = "TASK [gpufleet.cloud.security : Load the firewall ruleset atomically]"


def test_a_rule_added_to_the_running_table_is_drift_and_a_run_removes_it(rerun_node, tmp_path):
    host = rerun_node
    # The file and the table's comment stay as the role wrote them: only
    # the kernel's rules change, as `nft add rule` by hand does.
    host.run_test("nft add rule inet gpufleet input tcp dport 4444 accept")
    play = tmp_path / "firewall.yml"
    play.write_text(FIREWALL_PLAY)
    try:
        check = ansible_playbook(play, host.backend.name, options=("--check", "--diff"))
        out = check.stdout
        assert check.returncode == 0, out + check.stderr
        task = out.split(LOAD_TASK, 1)[1].split("TASK [", 1)[0]
        assert f"changed: [{host.backend.name}]" in task, task
        assert re.search(r"^-\s+tcp dport 4444 accept", task, re.M), task
        assert "tcp dport 4444" in host.check_output("nft list table inet gpufleet"), "check mode changed nothing"
    finally:
        run = ansible_playbook(play, host.backend.name)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tcp dport 4444" not in host.check_output("nft list table inet gpufleet")


def test_nftables_service_leaves_other_tables_alone(host):
    # prepare.yml's drop-in would load another file at boot: moved aside.
    assert_dropin_moved_aside(host, "nftables.service", "50-local.conf", "nftables-local.conf", kept=["90-gpufleet.conf"])
    conf = assert_file(host, "/etc/nftables.conf", mode=0o755, contains=('include "/etc/nftables.d/*.nft"',))
    assert not [line for line in conf.splitlines() if line.strip().startswith("flush")], conf
    host.run_test("nft add table inet gft_foreign")
    try:
        # Debian's unit flushes every table on stop; the role's drop-in
        # makes a restart remove and reload only gpufleet's.
        host.run_test("systemctl restart nftables")
        tables = host.check_output("nft list tables")
        assert "table inet gft_foreign" in tables and "table inet gpufleet" in tables, tables
    finally:
        host.run("nft delete table inet gft_foreign")


def test_ssh_only_from_the_allowed_networks(host, namespaces):
    assert probe(host, "ok", 4, 22) == "open"
    assert probe(host, "ok", 6, 22) == "open"
    assert probe(host, "no", 4, 22) == denied(host)
    assert probe(host, "no", 6, 22) == denied(host)


def test_exporter_ports_only_from_the_monitoring_networks(host, namespaces, listener):
    listener(host, 9100)
    listener(host, 8765)
    assert probe(host, "ok", 4, 9100) == "open"
    assert probe(host, "no", 4, 9100) == denied(host)
    # security_monitoring_cidrs has no IPv6 network.
    assert probe(host, "ok", 6, 9100) == denied(host)
    # A port no rule opens stays closed even to an allowed network.
    assert probe(host, "ok", 4, 8765) == denied(host)


def test_an_undeclared_listener_fails_the_report(rerun_node, listener, tmp_path):
    host = rerun_node
    play = tmp_path / "ports.yml"
    play.write_text(ROLE_PLAY % "listening_ports")
    listener(host, 8765)
    result = ansible_playbook(play, host.backend.name)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "Listening on the network, declared by no role" in out, out
    assert "tcp/8765" in out and "python3" in out, out
    assert "tcp/22 " not in out.split("declared by no role", 1)[1], "sshd is declared"

    declared = ansible_playbook(
        play, host.backend.name, extra_vars={"security_listening_ports_allowed": [{"port": 8765, "proto": "tcp"}]}
    )
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert "tcp/8765 on * | python3" in declared.stdout, declared.stdout
