"""The scoped multicast groups of ``K`` workers (:mod:`coded_shuffle.transport.multicast`'s
docstring): their addresses from the job's ``--multicast`` group, each set of workers' group, the
groups a worker joins, and how many one socket may join on this host."""

from __future__ import annotations

import ipaddress

from .._checks import check_int
from ..codec import EVERY_WORKER

__all__ = ["parse_group", "scope_groups", "max_memberships"]


def parse_group(text: str) -> tuple[str, int]:
    """``GROUP:PORT`` as ``(group, port)``: an IPv4 multicast group and a UDP port.

    Examples
    --------
    >>> parse_group("239.1.2.3:5000")
    ('239.1.2.3', 5000)
    >>> parse_group("10.0.0.1:5000")
    Traceback (most recent call last):
    ...
    ValueError: --multicast: '10.0.0.1' is not an IPv4 multicast group (224.0.0.0/4)
    """
    host, sep, port = str(text).rpartition(":")
    if not sep:
        raise ValueError(f"--multicast: {text!r} is not GROUP:PORT")
    try:
        group = ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"--multicast: {host!r} is not an IPv4 address") from None
    if not group.is_multicast:
        raise ValueError(f"--multicast: {host!r} is not an IPv4 multicast group (224.0.0.0/4)")
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:  # "²" is a digit, no int
        raise ValueError(f"--multicast: the port must be 1 to 65535, not {port!r}")
    return str(group), int(port)


def scope_groups(group: str, K: int) -> list[str]:
    """The addresses of the scoped groups of ``K`` workers from ``group`` (module docstring):
    ``group`` (every worker), then one a pair ``(i, j)``, ``i < j``, in the order of
    :func:`itertools.combinations`, then one a worker. ValueError, naming ``--multicast``, when
    they would leave ``group``'s ``/8``.

    Examples
    --------
    >>> scope_groups("239.1.0.0", 3)
    ['239.1.0.0', '239.1.0.1', '239.1.0.2', '239.1.0.3', '239.1.0.4', '239.1.0.5', '239.1.0.6']
    """
    base = ipaddress.IPv4Address(parse_group(f"{group}:1")[0])
    K = check_int(K, "K", minimum=1)
    n = 1 + K * (K - 1) // 2 + K
    last = int(base) + n - 1
    if last >> 24 != int(base) >> 24:
        raise ValueError(
            f"--multicast: {base} leaves no room for the {n} groups of {K} workers in its /8; "
            f"take a lower group, at most {ipaddress.IPv4Address((int(base) | 0xFFFFFF) - n + 1)}"
        )
    return [str(base + i) for i in range(n)]


def _group_index(mask: int, K: int) -> int:
    """The scoped group of the workers of bit mask ``mask``: a pair's, a worker's, or 0 (all)."""
    if mask == EVERY_WORKER or mask <= 0:
        return 0
    members = [k for k in range(K) if mask >> k & 1]
    if len(members) == 2:
        i, j = members
        return 1 + i * (2 * K - i - 1) // 2 + (j - i - 1)
    if len(members) == 1:
        return 1 + K * (K - 1) // 2 + members[0]
    return 0


def _worker_groups(worker: int, K: int) -> list[int]:
    """The scoped groups worker ``worker`` joins: every worker's, its pairs', its own."""
    pairs = [_group_index((1 << worker) | (1 << k), K) for k in range(K) if k != worker]
    return [0, *pairs, _group_index(1 << worker, K)]


def max_memberships() -> int:
    """The multicast groups one socket may join on this host (``net.ipv4.igmp_max_memberships``;
    20, Linux's default, where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/igmp_max_memberships") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 20


def _group_members(K: int) -> list[list[int]]:
    """The workers of every scoped group, by its index: the inverse of :func:`_group_index`."""
    pairs = [[i, j] for i in range(K) for j in range(i + 1, K)]
    return [list(range(K)), *pairs, *([k] for k in range(K))]
