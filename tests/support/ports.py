"""A free TCP port, for servers the tests start on the loopback."""

from __future__ import annotations

import socket


def free_port(address: str = "127.0.0.1") -> int:
    """A port nothing listens on now at `address` (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]
