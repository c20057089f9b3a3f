"""The scoped multicast groups of ``K`` workers (:mod:`coded_shuffle.transport.multicast`'s
docstring): their addresses from the job's ``--multicast`` group, each set of workers' group, the
groups a worker joins, and how many one socket may join on this host.

Up to :data:`PAIR_SCOPE_MAX_K` workers there is a group per pair of workers (``K (K - 1) / 2``),
so that a worker's downlink carries only the pairs' symbols it decodes; that takes ``K + 1``
memberships a socket and ``K (K - 1) / 2 + K + 1`` addresses (523,776 pairs at ``K = 1024``).
Beyond, the workers are cut into ``B <= 64`` blocks of ``b = ceil(K / 64)`` consecutive workers
(:func:`scope_block`) and there is a group per pair of blocks, a block with itself included
(``B (B + 1) / 2``, at most 2080): a span whose readers lie in one or two blocks goes, once, to
their blocks' group. The master's uplink still sends every span once (the coded gain is kept);
the cost is on the downlinks: a worker receives the spans of every pair of its block with
another worker, about ``b`` times the pairs' symbols it decodes (:func:`scope_downlinks` counts it
exactly). A worker joins ``B + 2 <= 66`` groups, as many as the pair groups ask at ``K = 64``.
With ``b = 1`` the block pairs are the worker pairs and the layout is the pair groups'.
"""

from __future__ import annotations

import ipaddress

from .._checks import check_int
from ..codec import EVERY_WORKER

__all__ = [
    "PAIR_SCOPE_MAX_K", "parse_group", "scope_block", "scope_groups", "scope_downlinks", "max_memberships",
]  # fmt: skip

#: The most workers with a multicast group per pair of workers; beyond, a group per pair of blocks.
PAIR_SCOPE_MAX_K = 64


def scope_block(K: int) -> int:
    """Workers a block of the scoped groups: 1 (a group per pair of workers) up to
    :data:`PAIR_SCOPE_MAX_K`, else ``ceil(K / 64)`` (at most 64 blocks).

    >>> scope_block(64), scope_block(65), scope_block(1024)
    (1, 2, 16)
    """
    K = check_int(K, "K", minimum=1)
    return 1 if K <= PAIR_SCOPE_MAX_K else -(-K // PAIR_SCOPE_MAX_K)


def _block_pairs(K: int) -> list[tuple[int, int]]:
    """The pairs of blocks with a group, in order: ``A < C`` (and ``A == C`` with blocks of more
    than one worker), as :func:`itertools.combinations` (``combinations_with_replacement``)."""
    b = scope_block(K)
    B = -(-K // b)
    return [(A, C) for A in range(B) for C in range(A if b > 1 else A + 1, B)]


def _block_pair_index(A: int, C: int, K: int, b: int) -> int:
    """The index of blocks ``A <= C``'s group among the groups (after group 0)."""
    B = -(-K // b)
    if b == 1:
        return 1 + A * (2 * B - A - 1) // 2 + (C - A - 1)
    return 1 + A * (2 * B - A + 1) // 2 + (C - A)


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
    ``group`` (every worker), then one a pair of blocks (of workers while ``K <= 64``), in the
    order of :func:`itertools.combinations` (``combinations_with_replacement`` for blocks of
    several workers), then one a worker. ValueError, naming ``--multicast``, when they would leave
    ``group``'s ``/8``.

    Examples
    --------
    >>> scope_groups("239.1.0.0", 3)
    ['239.1.0.0', '239.1.0.1', '239.1.0.2', '239.1.0.3', '239.1.0.4', '239.1.0.5', '239.1.0.6']
    >>> len(scope_groups("239.1.0.0", 64)), len(scope_groups("239.1.0.0", 1024))
    (2081, 3105)
    """
    base = ipaddress.IPv4Address(parse_group(f"{group}:1")[0])
    K = check_int(K, "K", minimum=1)
    n = 1 + len(_block_pairs(K)) + K
    last = int(base) + n - 1
    if last >> 24 != int(base) >> 24:
        raise ValueError(
            f"--multicast: {base} leaves no room for the {n} groups of {K} workers in its /8; "
            f"take a lower group, at most {ipaddress.IPv4Address((int(base) | 0xFFFFFF) - n + 1)}"
        )
    return [str(base + i) for i in range(n)]


def _group_index(mask: int, K: int) -> int:
    """The scoped group of the workers of bit mask ``mask``: a worker's (one reader), its blocks'
    pair's (two readers, or with blocks of several workers readers in one or two blocks), or 0
    (every worker)."""
    if mask == EVERY_WORKER or mask <= 0:
        return 0
    members = [k for k in range(K) if mask >> k & 1]
    if len(members) == 1:
        return 1 + len(_block_pairs(K)) + members[0]
    b = scope_block(K)
    blocks = sorted({k // b for k in members})
    if len(blocks) == 1 and b > 1:
        return _block_pair_index(blocks[0], blocks[0], K, b)
    if len(blocks) == 2 and (b > 1 or len(members) == 2):
        return _block_pair_index(blocks[0], blocks[1], K, b)
    return 0


def _worker_groups(worker: int, K: int) -> list[int]:
    """The scoped groups worker ``worker`` joins: every worker's, its blocks' pairs', its own."""
    b = scope_block(K)
    mine = worker // b
    pairs = [1 + g for g, (A, C) in enumerate(_block_pairs(K)) if mine in (A, C)]
    return [0, *pairs, 1 + len(_block_pairs(K)) + worker]


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
    b = scope_block(K)

    def block(A: int) -> list[int]:
        return list(range(A * b, min(K, (A + 1) * b)))

    pairs = [block(A) + (block(C) if C != A else []) for A, C in _block_pairs(K)]
    return [list(range(K)), *pairs, *([k] for k in range(K))]


def scope_downlinks(readers: object, nbytes: object, *, K: int) -> dict[str, list[int]]:
    """Bytes each worker's downlink carries for spans of ``nbytes`` read by ``readers`` (bit
    masks, or :data:`~coded_shuffle.codec.EVERY_WORKER`), on a switch that forwards a group only
    to its members: ``"scoped"`` by this module's groups, ``"pairs"`` by a group per pair of
    workers (and one a worker), ``"read"`` what each decodes (the spans it reads), ``"every"``
    all to one group.

    Examples
    --------
    Two blocks of 2 at ``K = 4`` would put the pair ``(0, 2)``'s symbol in the group of blocks 0
    and 1; at ``K = 4`` the groups are the pairs', and the downlinks carry what they read:

    >>> scope_downlinks([0b0101, 0b0011, 0b0001], [10, 20, 5], K=4)["scoped"]
    [35, 20, 10, 0]
    >>> scope_downlinks([0b11], [10], K=66)["scoped"][:4]  # blocks of 2: workers 0 and 1
    [10, 10, 0, 0]
    """
    K = check_int(K, "K", minimum=1)
    masks = [int(m) for m in readers]  # type: ignore[attr-defined]
    sizes = [int(n) for n in nbytes]  # type: ignore[attr-defined]
    if len(masks) != len(sizes):
        raise ValueError(
            f"Arguments 'readers' and 'nbytes' must have one entry a span, not {len(masks)} and {len(sizes)}."
        )
    members = _group_members(K)
    out = {name: [0] * K for name in ("scoped", "pairs", "read", "every")}
    for m, n in zip(masks, sizes, strict=True):
        readers_m = list(range(K)) if m == EVERY_WORKER or m <= 0 else [k for k in range(K) if m >> k & 1]
        for k in members[_group_index(m, K)]:
            out["scoped"][k] += n
        for k in readers_m if len(readers_m) <= 2 else range(K):
            out["pairs"][k] += n
        for k in readers_m:
            out["read"][k] += n
        for k in range(K):
            out["every"][k] += n
    return out
