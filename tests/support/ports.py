"""A free TCP port, for servers the tests start on the loopback."""

from __future__ import annotations

import socket


def free_port(address: str = "127.0.0.1") -> int:
    """A port nothing listens on now at `address` (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


# An address where connections are refused and stay refused: nothing
# listens on the loopback's discard port, and the tests' servers take the
# kernel's ephemeral ports. A stopped server's own port is not that: the
# kernel may hand it to another test's server (on another pytest worker)
# at once, which then answers. The same holds on a test node's own
# loopback, where the roles' bad-input cases name it as a mirror.
REFUSED_URL = "http://127.0.0.1:9"
