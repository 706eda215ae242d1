"""The listen ports tests hand to collectors, Jaeger and Prometheus stay out of the kernel's
ephemeral range, where an outbound connection could take one before the server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from tests.support.ports import free_ports

RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE.exists(), reason="the ephemeral range is read from Linux's /proc")
def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    floor = int(RANGE.read_text().split()[0])
    ports = free_ports(6)
    assert len(set(ports)) == 6
    assert all(10_000 <= port < floor for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
