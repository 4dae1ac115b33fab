"""Stand-in for ``sedna.common.utils``: :func:`get_host_ip` and :func:`singleton`.

Sedna finds the host address by "connecting" a UDP socket to 8.8.8.8 and reading the local
address the kernel chose. That needs a route to the internet and depends on a public
resolver's address. This version only reads the host's own interface table; it sends
nothing, connects nowhere and does no DNS lookup.
"""
from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["get_host_ip", "singleton"]

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
_SIOCGIFFLAGS = 0x8913  # Linux ioctl numbers (linux/sockios.h)
_SIOCGIFADDR = 0x8915
_IFF_UP = 0x1
_RTF_UP = 0x1  # route flag (linux/route.h)
_IFF_LOOPBACK = 0x8
_ROUTE_TABLE = Path("/proc/net/route")


def _default_route_interfaces(table: Path = _ROUTE_TABLE) -> list[str]:
    """Interfaces carrying an IPv4 default route, lowest metric first ([] if unknown)."""
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return []
    routes: list[tuple[int, str]] = []
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        iface, destination, flags, metric, mask = fields[0], fields[1], fields[3], fields[6], \
            fields[7]
        try:
            up = int(flags, 16) & _RTF_UP
            if up and int(destination, 16) == 0 and int(mask, 16) == 0:
                routes.append((int(metric), iface))
        except ValueError:
            continue
    return [iface for _, iface in sorted(routes)]


def _interface_ipv4(sock: socket.socket, name: str) -> str | None:
    """IPv4 address of an *up*, non-loopback interface ``name``, else None."""
    import fcntl

    request = struct.pack("256s", name.encode()[:15])
    try:
        flags = struct.unpack_from("H", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request),
                                   16)[0]
        if not flags & _IFF_UP or flags & _IFF_LOOPBACK:
            return None
        answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
    except OSError:  # no IPv4 address on this interface, or it vanished
        return None
    address = socket.inet_ntoa(answer[20:24])
    return None if ipaddress.IPv4Address(address).is_loopback else address


def get_host_ip() -> str:
    """The host's primary IPv4 address, or ``"127.0.0.1"`` when it has none.

    Primary means: the address of the interface that carries the default route (lowest
    metric first), else of the first up, non-loopback interface with an IPv4 address, in
    interface-index order. Read with ``ioctl(SIOCGIFADDR)`` on an unconnected UDP socket:
    no packet is sent and no name is resolved. Linux only; on other systems, and whenever
    the interface table cannot be read, the result is ``"127.0.0.1"``.
    """
    if not sys.platform.startswith("linux"):
        return LOOPBACK
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError as exc:
        logger.debug("cannot list network interfaces: %s", exc)
        return LOOPBACK
    preferred = [n for n in _default_route_interfaces() if n in names]
    ordered = preferred + [n for n in names if n not in preferred and n != "lo"]
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        logger.debug("cannot open a socket to read interface addresses: %s", exc)
        return LOOPBACK
    with sock:
        for name in ordered:
            address = _interface_ipv4(sock, name)
            if address is not None:
                return address
    return LOOPBACK


def singleton(cls: Callable[..., T]) -> Callable[..., T]:
    """Sedna's decorator: the first call creates the instance, later calls return it.

    Arguments of later calls are ignored, as in Sedna.
    """
    instances: dict[int, T] = {}

    @functools.wraps(cls)
    def get_instance(*args: Any, **kwargs: Any) -> T:
        if 0 not in instances:
            instances[0] = cls(*args, **kwargs)
        return instances[0]

    return get_instance
