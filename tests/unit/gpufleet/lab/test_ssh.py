from __future__ import annotations

import socket
import threading

import pytest

from gpufleet.lab import _nodes, _ssh


def test_known_hosts_line_uses_bracketed_endpoint_and_drops_the_comment():
    node = _nodes.node(2)
    line = _ssh.known_hosts_line(node, "ssh-ed25519 AAAAKEY root@lab-node-2\n")
    assert line == "[127.0.0.12]:2202 ssh-ed25519 AAAAKEY"


@pytest.mark.parametrize("bad", ["", "garbage", "AAAA ssh-ed25519"])
def test_known_hosts_line_rejects_what_is_not_a_host_key(bad):
    with pytest.raises(ValueError, match="gpufleet-lab-1: not an SSH public host key"):
        _ssh.known_hosts_line(_nodes.node(1), bad)


def test_ensure_key_creates_once_with_private_mode(tmp_path):
    key = _ssh.ensure_key(tmp_path / "lab")
    first = key.read_bytes()
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.with_suffix(".pub").read_text().startswith("ssh-ed25519 ")
    assert _ssh.ensure_key(tmp_path / "lab").read_bytes() == first


def _serve_once(banner: bytes) -> tuple[int, threading.Thread]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer():
        conn, _addr = srv.accept()
        conn.sendall(banner)
        conn.close()
        srv.close()

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    return srv.getsockname()[1], t


def test_wait_for_banner_accepts_an_ssh_server():
    port, t = _serve_once(b"SSH-2.0-OpenSSH_9.2\r\n")
    node = _nodes.Node(index=1, name="n", hostname="n", address="127.0.0.1", port=port)
    _ssh.wait_for_banner(node, timeout=5)
    t.join(2)


def test_wait_for_banner_times_out_naming_the_node():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens there now
    node = _nodes.Node(index=9, name="gpufleet-lab-9", hostname="x", address="127.0.0.1", port=port)
    with pytest.raises(TimeoutError, match="gpufleet-lab-9: sshd did not answer on 127.0.0.1"):
        _ssh.wait_for_banner(node, timeout=1)
