"""Free 127.0.0.1 ports for servers a test starts by number.

A port found by binding to 0 comes from the kernel's ephemeral range, the same range outbound
connections take their source ports from: between the test closing its probe socket and the server
binding the number, any client on the machine (a collector's exporter, Prometheus scraping) may take
it, and the server dies with "address already in use" (CI saw this once in the fleet test). Ports
below the ephemeral range are never handed to outbound connections, so only another explicit binder
can race for them.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # above the well-known and most registered service ports


def _ephemeral_floor() -> int | None:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_ports(count: int) -> list[int]:
    """Distinct free 127.0.0.1 ports, outside the ephemeral range where the system says what it is."""
    floor = _ephemeral_floor()
    if floor is None or floor - _LOWEST < 1000:
        return _kernel_ports(count)
    ports: list[int] = []
    socks: list[socket.socket] = []
    try:
        for candidate in random.sample(range(_LOWEST, floor), min(floor - _LOWEST, 200 + count)):
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                sock.close()
                continue
            socks.append(sock)
            ports.append(candidate)
            if len(ports) == count:
                return ports
    finally:
        for sock in socks:
            sock.close()
    return _kernel_ports(count)


def _kernel_ports(count: int) -> list[int]:
    """Ports the kernel picks (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()
