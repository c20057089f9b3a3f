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

Racks (``racks``: hosts a rack, in the order of the workers, as
:attr:`coded_shuffle.network.Network.racks`): beyond 64 workers the blocks then never straddle a
rack (:func:`scope_blocks`): each rack is cut into blocks of at most ``b'`` workers (sizes
differing by at most one), ``b' >= b`` the least that makes at most 64 blocks. A span then crosses
only the rack downlinks of its readers' racks, as with a group per pair of workers, where a block
that straddles two racks sends its pairs' symbols into both (:func:`scope_downlinks` counts each
rack's downlink). Where ``b`` divides every rack's hosts the layout is the consecutive one.
A block per rack would cross no fewer rack links with the pairs' symbols and put a whole rack's
pairs on each downlink (``b'`` up to the rack's hosts).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from .._checks import check_int, check_racks
from ..codec import EVERY_WORKER

__all__ = [
    "PAIR_SCOPE_MAX_K", "parse_group", "scope_block", "scope_blocks", "scope_groups", "scope_downlinks",
    "max_memberships",
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


def scope_blocks(K: int, racks: object = None) -> tuple[int, ...]:
    """The block of each of the ``K`` workers (module docstring): ``k // scope_block(K)``, or with
    ``racks`` beyond 64 workers blocks inside the racks, at most 64.

    >>> scope_blocks(6, racks=(3, 3))  # up to 64 workers, a block a worker (the pair groups)
    (0, 1, 2, 3, 4, 5)
    >>> b = scope_blocks(130, racks=(65, 65))  # blocks of 3: 22 a rack, none astride the two
    >>> max(b) + 1, b[64], b[65], scope_blocks(130)[64:66]
    (44, 21, 22, (21, 21))
    """
    K = check_int(K, "K", minimum=1)
    return _blocks(K, check_racks(racks, K))



def _racks(K: int, racks: object) -> tuple[int, ...]:
    """``racks`` checked for ``K`` workers, as a tuple (the form the layouts are cached by)."""
    sizes = check_racks(racks, K)
    assert sizes is not None
    return sizes


@lru_cache(maxsize=16)
def _blocks(K: int, racks: tuple[int, ...] | None) -> tuple[int, ...]:
    b = scope_block(K)
    if racks is None or b == 1:
        return tuple(k // b for k in range(K))
    while sum(-(-h // b) for h in racks) > PAIR_SCOPE_MAX_K:
        b += 1
    out: list[int] = []
    for h in racks:  # c blocks of sizes differing by at most one
        c, first = -(-h // b), (max(out) + 1 if out else 0)
        out += [first + i * c // h for i in range(h)]
    return tuple(out)


def _block_pairs(K: int, racks: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
    """The pairs of blocks with a group, in order: ``A < C`` (and ``A == C`` with blocks of more
    than one worker), as :func:`itertools.combinations` (``combinations_with_replacement``)."""
    blocks = _blocks(K, racks)
    B, single = blocks[-1] + 1, _single(blocks)
    return [(A, C) for A in range(B) for C in range(A + 1 if single else A, B)]


def _single(blocks: tuple[int, ...]) -> bool:
    """Whether every block is one worker (the pair groups)."""
    return blocks[-1] + 1 == len(blocks)


def _block_pair_index(A: int, C: int, blocks: tuple[int, ...]) -> int:
    """The index of blocks ``A <= C``'s group among the groups (after group 0)."""
    B = blocks[-1] + 1
    if _single(blocks):
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


def scope_groups(group: str, K: int, racks: object = None) -> list[str]:
    """The addresses of the scoped groups of ``K`` workers from ``group`` (module docstring):
    ``group`` (every worker), then one a pair of blocks (of workers while ``K <= 64``), in the
    order of :func:`itertools.combinations` (``combinations_with_replacement`` for blocks of
    several workers), then one a worker; the blocks of :func:`scope_blocks` with ``racks``.
    ValueError, naming ``--multicast``, when they would leave ``group``'s ``/8``.

    Examples
    --------
    >>> scope_groups("239.1.0.0", 3)
    ['239.1.0.0', '239.1.0.1', '239.1.0.2', '239.1.0.3', '239.1.0.4', '239.1.0.5', '239.1.0.6']
    >>> len(scope_groups("239.1.0.0", 64)), len(scope_groups("239.1.0.0", 1024))
    (2081, 3105)
    """
    base = ipaddress.IPv4Address(parse_group(f"{group}:1")[0])
    K = check_int(K, "K", minimum=1)
    n = 1 + len(_block_pairs(K, check_racks(racks, K))) + K
    last = int(base) + n - 1
    if last >> 24 != int(base) >> 24:
        raise ValueError(
            f"--multicast: {base} leaves no room for the {n} groups of {K} workers in its /8; "
            f"take a lower group, at most {ipaddress.IPv4Address((int(base) | 0xFFFFFF) - n + 1)}"
        )
    return [str(base + i) for i in range(n)]


def _group_index(mask: int, K: int, racks: tuple[int, ...] | None = None) -> int:
    """The scoped group of the workers of bit mask ``mask``: a worker's (one reader), its blocks'
    pair's (two readers, or with blocks of several workers readers in one or two blocks), or 0
    (every worker)."""
    if mask == EVERY_WORKER or mask <= 0:
        return 0
    members = _bits(mask)
    if len(members) == 1:
        return 1 + len(_block_pairs(K, racks)) + members[0]
    of = _blocks(K, racks)
    single = _single(of)
    blocks = sorted({of[k] for k in members})
    if len(blocks) == 1 and not single:
        return _block_pair_index(blocks[0], blocks[0], of)
    if len(blocks) == 2 and (not single or len(members) == 2):
        return _block_pair_index(blocks[0], blocks[1], of)
    return 0


def _bits(mask: int) -> list[int]:
    """The workers of bit mask ``mask`` (``mask >= 0``), increasing, one step a member."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _worker_groups(worker: int, K: int, racks: tuple[int, ...] | None = None) -> list[int]:
    """The scoped groups worker ``worker`` joins: every worker's, its blocks' pairs', its own."""
    mine = _blocks(K, racks)[worker]
    pairs = _block_pairs(K, racks)
    return [0, *(1 + g for g, (A, C) in enumerate(pairs) if mine in (A, C)), 1 + len(pairs) + worker]


def max_memberships() -> int:
    """The multicast groups one socket may join on this host (``net.ipv4.igmp_max_memberships``;
    20, Linux's default, where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/igmp_max_memberships") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 20


def _group_members(K: int, racks: tuple[int, ...] | None = None) -> list[list[int]]:
    """The workers of every scoped group, by its index: the inverse of :func:`_group_index`."""
    of = _blocks(K, racks)
    block: list[list[int]] = [[] for _ in range(of[-1] + 1)]
    for k, A in enumerate(of):
        block[A].append(k)
    pairs = [block[A] + (block[C] if C != A else []) for A, C in _block_pairs(K, racks)]
    return [list(range(K)), *pairs, *([k] for k in range(K))]


def scope_downlinks(readers: object, nbytes: object, *, K: int, racks: object = None) -> dict[str, list[int]]:
    """Bytes each worker's downlink carries for spans of ``nbytes`` read by ``readers`` (bit
    masks, or :data:`~coded_shuffle.codec.EVERY_WORKER`), on a switch that forwards a group only
    to its members: ``"scoped"`` by this module's groups, ``"pairs"`` by a group per pair of
    workers (and one a worker), ``"read"`` what each decodes (the spans it reads), ``"every"``
    all to one group.

    With ``racks`` (hosts a rack) the groups are those on the racks (:func:`scope_blocks`), and
    ``"consecutive"`` counts the blocks of consecutive workers beside them; ``"rack_<layout>"``,
    for each of those layouts, the bytes each rack's downlink from the spine carries (a span once
    into every rack that holds a member of its group, as a spine that replicates and forwards a
    group only to the racks that joined it).

    Examples
    --------
    Two blocks of 2 at ``K = 4`` would put the pair ``(0, 2)``'s symbol in the group of blocks 0
    and 1; at ``K = 4`` the groups are the pairs', and the downlinks carry what they read:

    >>> scope_downlinks([0b0101, 0b0011, 0b0001], [10, 20, 5], K=4)["scoped"]
    [35, 20, 10, 0]
    >>> scope_downlinks([0b11], [10], K=66)["scoped"][:4]  # blocks of 2: workers 0 and 1
    [10, 10, 0, 0]
    >>> d = scope_downlinks([3 << 33], [10], K=66, racks=(33, 33))  # workers 33 and 34, rack 1
    >>> d["rack_consecutive"], d["rack_scoped"], d["rack_read"]  # block 16 (32, 33) astride the racks
    ([10, 10], [0, 10], [0, 10])
    """
    K = check_int(K, "K", minimum=1)
    sizes_r = check_racks(racks, K)
    masks = [int(m) for m in readers]  # type: ignore[attr-defined]
    sizes = [int(n) for n in nbytes]  # type: ignore[attr-defined]
    if len(masks) != len(sizes):
        raise ValueError(
            f"Arguments 'readers' and 'nbytes' must have one entry a span, not {len(masks)} and {len(sizes)}."
        )
    layouts = {"scoped": sizes_r} if sizes_r is None else {"scoped": sizes_r, "consecutive": None}
    members = {name: _group_members(K, r) for name, r in layouts.items()}
    out = {name: [0] * K for name in (*layouts, "pairs", "read", "every")}
    to_all = dict.fromkeys(out, 0)  # bytes of spans every worker receives, added at the end
    for m, n in zip(masks, sizes, strict=True):
        readers_m = None if m == EVERY_WORKER or m <= 0 else _bits(m)
        for name, r in layouts.items():
            g = _group_index(m, K, r)
            if g == 0:
                to_all[name] += n
            else:
                for k in members[name][g]:
                    out[name][k] += n
        if readers_m is None:
            to_all["read"] += n
            to_all["pairs"] += n
        else:
            for k in readers_m:
                out["read"][k] += n
            if len(readers_m) <= 2:
                for k in readers_m:
                    out["pairs"][k] += n
            else:
                to_all["pairs"] += n
        to_all["every"] += n
    for name, n in to_all.items():
        out[name] = [v + n for v in out[name]]
    if sizes_r is not None:
        out.update(_rack_downlinks(masks, sizes, K, sizes_r, members))
    return out


def _rack_downlinks(
    masks: list[int], sizes: list[int], K: int, racks: tuple[int, ...], members: dict[str, list[list[int]]]
) -> dict[str, list[int]]:
    """The rack downlinks' bytes of :func:`scope_downlinks`: a span into each rack of its group."""
    rack = [r for r, h in enumerate(racks) for _ in range(h)]
    every = set(range(len(racks)))
    layouts = {"scoped": racks, "consecutive": None}
    into = {name: [{rack[k] for k in g} for g in members[name]] for name in layouts}
    out = {f"rack_{name}": [0] * len(racks) for name in (*layouts, "pairs", "read", "every")}
    for m, n in zip(masks, sizes, strict=True):
        read = every if m == EVERY_WORKER or m <= 0 else {rack[k] for k in _bits(m)}
        spans = {name: into[name][_group_index(m, K, r)] for name, r in layouts.items()}
        two = m != EVERY_WORKER and m > 0 and bin(m).count("1") <= 2
        spans.update(pairs=read if two else every, read=read, every=every)
        for name, hit in spans.items():
            for r in hit:
                out[f"rack_{name}"][r] += n
    return out
