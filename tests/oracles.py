"""References the tests and proofs compare the library with: brute force and the documented formulas.

Each function is written from a definition (``docs/``, the docstrings' brute-force equivalents,
the claims of ``proofs/``) in plain Python, numpy, networkx or scipy, and imports nothing from
``coded_shuffle``: a reference value never comes from the code under test. They are slow and
meant for small cases. :mod:`tests.test_oracles` checks them against each other and against
published values.

=========================  ===================================================================
loads                      :func:`brute_leftovers`, :func:`brute_load`
cycle packing              :func:`simple_cycles`, :func:`brute_max_packing`,
                           :func:`enumeration_packing`
lower bound                :func:`brute_bound`, :func:`brute_tau`, :func:`brute_w_minus_min_fas`
shuffle matrices           :func:`magic_matrices`
bytes                      :func:`checksum_from_spec`, :func:`frame_reference`,
                           :func:`read_frame_reference`
epoch orders               :func:`permutation_from_spec`, :func:`feistel_keys_from_spec`,
                           :func:`feistel_from_spec`
=========================  ===================================================================
"""

from __future__ import annotations

import functools
import itertools
import struct
import zlib

import numpy as np

# --------------------------------------------------------------------------- loads


def brute_leftovers(S) -> list[list[int]]:
    """``Omega`` by the definition, entry by entry: ``S[i][j] - min(S[i][j], S[j][i])`` off the
    diagonal.

    >>> brute_leftovers([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    """
    K = len(S)
    return [
        [0 if i == j else int(S[i][j]) - min(int(S[i][j]), int(S[j][i])) for j in range(K)] for i in range(K)
    ]


def brute_load(S, cycles_used: int) -> int:
    """``W - P - |C|`` from the entries of ``S``: moved points, minus the order-2 symbols, minus
    one symbol per cycle used.

    >>> brute_load([[2, 1, 2], [2, 1, 2], [1, 3, 1]], 0), brute_load([[2, 1, 2], [2, 1, 2], [1, 3, 1]], 1)
    (7, 6)
    """
    K = len(S)
    W = sum(int(S[i][j]) for i in range(K) for j in range(K) if i != j)
    P = sum(min(int(S[i][j]), int(S[j][i])) for i, j in itertools.combinations(range(K), 2))
    return W - P - cycles_used


# --------------------------------------------------------------------------- cycle packing


def simple_cycles(omega) -> list[tuple[int, ...]]:
    """Every directed simple cycle (length >= 2) of the support of ``omega``, each listed once from
    its smallest worker, by extending paths.

    >>> simple_cycles([[0, 1, 0], [1, 0, 1], [1, 0, 0]])
    [(0, 1), (0, 1, 2)]
    """
    K = len(omega)
    out: list[tuple[int, ...]] = []

    def extend(path: list[int], on: set[int]) -> None:
        for v in range(path[0], K):
            if omega[path[-1]][v] <= 0:
                continue
            if v == path[0]:
                if len(path) >= 2:
                    out.append(tuple(path))
            elif v not in on:
                path.append(v)
                on.add(v)
                extend(path, on)
                on.discard(v)
                path.pop()

    for s in range(K):
        extend([s], {s})
    return out


def brute_max_packing(omega) -> int:
    """``nu(Omega)``: the most directed simple cycles, with multiplicity, that use each arc
    ``u -> v`` at most ``omega[u][v]`` times; by trying every multiset of :func:`simple_cycles`
    (cycles taken in non-decreasing index order).

    >>> brute_max_packing([[0, 2, 0], [0, 0, 2], [1, 0, 0]])
    1
    """
    cycles = simple_cycles(omega)
    K = len(omega)
    arcs = [[u * K + c[(k + 1) % len(c)] for k, u in enumerate(c)] for c in cycles]

    @functools.cache
    def best(state: tuple[int, ...], start: int) -> int:
        value = 0
        for c in range(start, len(cycles)):
            if all(state[a] > 0 for a in arcs[c]):
                nxt = list(state)
                for a in arcs[c]:
                    nxt[a] -= 1
                value = max(value, 1 + best(tuple(nxt), c))
        return value

    return best(tuple(int(x) for row in omega for x in row), 0)


def enumeration_packing(omega, *, integral: bool = True) -> int | float:
    """Packing over every simple cycle (listed by networkx), solved by HiGHS: the set packing
    (an int), or with ``integral=False`` its linear relaxation, the fractional packing (a float).

    >>> enumeration_packing([[0, 1, 1], [1, 0, 1], [1, 1, 0]]), enumeration_packing([[0, 1], [0, 0]])
    (3, 0)
    """
    import networkx as nx
    from scipy.optimize import Bounds, LinearConstraint, milp

    om = np.asarray(omega)
    graph = nx.DiGraph([(int(i), int(j)) for i, j in zip(*np.nonzero(om), strict=True)])
    cycles = [tuple(c) for c in nx.simple_cycles(graph)]
    if not cycles:
        return 0 if integral else 0.0
    arcs = sorted({(c[k], c[(k + 1) % len(c)]) for c in cycles for k in range(len(c))})
    index = {a: r for r, a in enumerate(arcs)}
    A = np.zeros((len(arcs), len(cycles)))
    for j, c in enumerate(cycles):
        for k in range(len(c)):
            A[index[(c[k], c[(k + 1) % len(c)])], j] = 1
    res = milp(
        -np.ones(len(cycles)),
        constraints=LinearConstraint(A, -np.inf, [om[a] for a in arcs]),
        integrality=np.full(len(cycles), int(integral)),
        bounds=Bounds(0, np.inf),
    )
    assert res.status == 0
    return int(round(-res.fun)) if integral else float(-res.fun)


# --------------------------------------------------------------------------- lower bound


@functools.cache
def _backward_masks(K: int) -> np.ndarray:
    """Row ``s``: 1 at ``i * K + j`` when holder ``i`` comes after receiver ``j`` in ordering ``s``
    (``itertools.permutations`` order); read-only."""
    perms = list(itertools.permutations(range(K)))
    masks = np.zeros((len(perms), K * K), dtype=np.int64)
    for s, sigma in enumerate(perms):
        pos = {w: p for p, w in enumerate(sigma)}
        for i in range(K):
            for j in range(K):
                if i != j and pos[i] > pos[j]:
                    masks[s, i * K + j] = 1
    masks.flags.writeable = False
    return masks


def brute_bound(S) -> int:
    """The genie bound by its definition (docs/algorithms.md, "The lower bound"): the most points held after
    their receiver, ``S[i][j]`` summed over ``i != j`` with ``i`` after ``j``, over all ``K!`` orderings.

    >>> brute_bound([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    6
    """
    S = np.asarray(S, dtype=np.int64)
    return int((_backward_masks(S.shape[0]) @ S.ravel()).max())


def brute_tau(omegas) -> np.ndarray:
    """``tau`` of each matrix of a stack ``(n, K, K)``: its off-diagonal weight minus the best
    backward weight over all ``K!`` orderings (the least weight of a feedback arc set).

    >>> brute_tau([[[0, 1, 0], [0, 0, 1], [1, 0, 0]]]).tolist()
    [1]
    """
    omegas = np.asarray(omegas, dtype=np.int64)
    n, K, _ = omegas.shape
    flat = (omegas * (1 - np.eye(K, dtype=np.int64))).reshape(n, K * K)
    return flat.sum(axis=1) - (flat @ _backward_masks(K).T).max(axis=1)


def _is_acyclic(K: int, arcs) -> bool:
    """Kahn's algorithm."""
    indeg = [0] * K
    out: list[list[int]] = [[] for _ in range(K)]
    for i, j in arcs:
        out[i].append(j)
        indeg[j] += 1
    stack = [v for v in range(K) if indeg[v] == 0]
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return seen == K


def brute_w_minus_min_fas(S) -> int:
    """``W - minFAS``: the off-diagonal weight minus the least weight of a set of arcs whose removal
    leaves the support acyclic, by trying every subset of arcs (tiny ``K`` only).

    >>> brute_w_minus_min_fas([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    6
    """
    K = len(S)
    arcs = [(i, j) for i in range(K) for j in range(K) if i != j and S[i][j] > 0]
    W = sum(int(S[i][j]) for i, j in arcs)
    best = W
    for mask in range(1 << len(arcs)):
        fas = [arcs[k] for k in range(len(arcs)) if mask >> k & 1]
        keep = [arcs[k] for k in range(len(arcs)) if not mask >> k & 1]
        if _is_acyclic(K, keep):
            best = min(best, sum(int(S[i][j]) for i, j in fas))
    return W - best


# --------------------------------------------------------------------------- shuffle matrices


def magic_matrices(K: int, b: int):
    """Every ``K x K`` non-negative integer matrix with all row and column sums ``b``, as lists of
    lists, rows in lexicographic order.

    >>> [sum(1 for _ in magic_matrices(3, b)) for b in range(4)]
    [1, 6, 21, 55]
    """

    def fill(k, cap):
        if k == K:
            if not any(cap):
                yield []
            return
        for row in itertools.product(*(range(min(b, c) + 1) for c in cap)):
            if sum(row) == b:
                for rest in fill(k + 1, tuple(c - x for c, x in zip(cap, row, strict=True))):
                    yield [list(row), *rest]

    yield from fill(0, (b,) * K)


# --------------------------------------------------------------------------- bytes

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def fmix64(x: int) -> int:
    """MurmurHash3's 64-bit finalizer."""
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _MASK64
    return x ^ (x >> 33)


def splitmix64(i: int) -> int:
    """Output ``i`` (from 0) of SplitMix64 started from state 0 (Steele, Lea and Flood, 2014).

    >>> hex(splitmix64(0))
    '0xe220a8397b1dcdaf'
    """
    z = ((i + 1) * _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def checksum_from_spec(record: bytes) -> int:
    """The 64-bit record checksum as docs/wire-format.md defines it:
    ``fmix64(L * 0x9E3779B97F4A7C15 + sum_i fmix64(w_i XOR splitmix64(i)))`` over the record's
    little-endian 64-bit words ``w_i`` (zero-padded), ``L`` its length in bytes, mod ``2^64``.

    >>> checksum_from_spec(b"") == fmix64(0) == 0
    True
    """
    record = bytes(record)
    padded = record + b"\0" * (-len(record) % 8)
    words = struct.unpack(f"<{len(padded) // 8}Q", padded)
    total = sum(fmix64(w ^ splitmix64(i)) for i, w in enumerate(words))
    return fmix64((len(record) * _GOLDEN + total) & _MASK64)


def frame_reference(ds, a, b, *, epoch, symbol, repair=False, runs=(), version=2) -> bytes:
    """One frame built from docs/wire-format.md with struct and numpy alone.

    ``ds`` is a dataset (only its ``data``, ``lengths``, ``variable`` and ``record_bytes`` are
    read); ``runs`` is the receiver index, rows ``(worker, first, count)``; ``version`` 1 writes
    the layout of version 1 (no index: the header's last field is reserved, 0).
    """
    a, b, symbol = (np.asarray(v, np.int64) for v in (a, b, symbol))
    n, x = a.size, np.asarray(ds.data)
    wide = n and max(int(a.max()), int(b.max()), int(symbol.max())) >= 0xFFFFFFFF
    flags = (1 if ds.variable else 0) | (2 if wide else 0) | (4 if repair else 0)
    pay = np.where((b >= 0)[:, None], x[a] ^ x[np.maximum(b, 0)], x[a])
    idt = "<u8" if wide else "<u4"
    none = 0xFFFFFFFFFFFFFFFF if wide else 0xFFFFFFFF
    cols = [symbol.astype(idt), a.astype(idt), np.where(b >= 0, b, none).astype(idt)]
    if ds.variable:
        la = ds.lengths[a]
        lb = np.where(b >= 0, ds.lengths[np.maximum(b, 0)], 0)
        plen = np.maximum(la, lb)
        cols += [la.astype("<u4"), lb.astype("<u4")]
        body = b"".join(pay[s, : plen[s]].tobytes() for s in range(n))
    else:
        body = pay.tobytes()
    entries = b"".join(b"".join(c[s].tobytes() for c in cols) for s in range(n))
    entries += b"".join(struct.pack("<III", *row) for row in runs)
    fields = (b"CSHF", version, flags, epoch, n, ds.record_bytes, len(body), 0, len(runs))
    head = struct.pack("<4sHHQIIQII", *fields)
    framing = head + entries + b"\0" * (-(len(head) + len(entries)) % 8)
    crc = zlib.crc32(framing)
    return framing[:32] + struct.pack("<I", crc) + framing[36:] + body


_HEADER_FIELDS = (
    "magic",
    "version",
    "flags",
    "epoch",
    "n_symbols",
    "record_bytes",
    "payload_bytes",
    "header_crc",
    "n_runs",
)


def read_frame_reference(raw: bytes) -> dict:
    """The parts of a frame of fixed-size records with 32-bit ids, read with struct and zlib from
    docs/wire-format.md: ``header`` (a dict of the header fields), ``entries`` (rows ``(symbol,
    a, b)``, ``b = -1`` for a point sent alone), ``runs`` (the receiver index), ``payload`` (the
    bytes of each entry) and ``crc_ok`` (whether the header CRC holds).
    """
    raw = bytes(raw)
    header = dict(zip(_HEADER_FIELDS, struct.unpack_from("<4sHHQIIQII", raw), strict=True))
    assert header["flags"] & 3 == 0, "variable-length records or 64-bit ids"
    n, r, B = header["n_symbols"], header["n_runs"], header["record_bytes"]
    rows = [struct.unpack_from("<III", raw, 40 + 12 * k) for k in range(n + r)]
    entries = [(s, a, -1 if b == 0xFFFFFFFF else b) for s, a, b in rows[:n]]
    framing = 40 + 12 * (n + r)
    framing += -framing % 8
    crc_ok = zlib.crc32(raw[:32] + bytes(4) + raw[36:framing]) == header["header_crc"]
    assert len(raw) == framing + n * B == framing + header["payload_bytes"], "payload length"
    payload = [raw[framing + s * B : framing + (s + 1) * B] for s in range(n)]
    return {"header": header, "entries": entries, "runs": rows[n:], "payload": payload, "crc_ok": crc_ok}


def xor_reference(rows, terms, length: int) -> bytes:
    """The XOR of the byte strings ``rows[t]`` for ``t`` in ``terms``, each zero-padded to ``length``."""
    acc = bytearray(length)
    for t in terms:
        acc = bytearray(x ^ y for x, y in zip(acc, rows[t].ljust(length, b"\0"), strict=True))
    return bytes(acc)


def terms_frame_reference(rows, offsets, terms, *, epoch, symbol, runs=(), sized=False) -> bytes:
    """A frame of many-term symbols (version 3, flag TERMS) from docs/wire-format.md, with struct.

    ``rows`` are the dataset's rows as bytes (one width); symbol ``s`` XORs the rows
    ``terms[offsets[s]:offsets[s + 1]]``; 32-bit ids. ``sized``: rows of many sizes (each
    ``rows[i]`` its own length), a frame of version 4 (flags TERMS and VARIABLE): each payload
    as long as its longest row, the rows zero-padded to it, end to end; ``record_bytes`` the
    longest row.
    """
    n = len(offsets) - 1
    width = max(len(r) for r in rows)
    entries = b"".join(struct.pack("<II", symbol[s], offsets[s + 1] - offsets[s]) for s in range(n))
    table = b"".join(struct.pack("<I", t) for t in terms)
    index = b"".join(struct.pack("<III", *row) for row in runs)
    body = b"".join(
        xor_reference(rows, mine, max(len(rows[t]) for t in mine) if sized else width)
        for mine in (terms[offsets[s] : offsets[s + 1]] for s in range(n))
    )
    version, flags = (4, 9) if sized else (3, 8)
    head = struct.pack("<4sHHQIIQII", b"CSHF", version, flags, epoch, n, width, len(body), 0, len(runs))
    framing = head + entries + table + index
    framing += b"\0" * (-len(framing) % 8)
    crc = zlib.crc32(framing)
    return framing[:32] + struct.pack("<I", crc) + framing[36:] + body


def read_terms_frame_reference(raw: bytes, lengths=None) -> dict:
    """The parts of a frame of many-term symbols with 32-bit ids, read with struct and zlib:
    ``header``, ``entries`` (rows ``(symbol, n_terms)``), ``terms`` (one list a symbol), ``runs``,
    ``payload`` and ``crc_ok``. A frame of version 4 (flag VARIABLE) needs ``lengths``, every
    row's length by id: a payload is as long as its longest row."""
    raw = bytes(raw)
    header = dict(zip(_HEADER_FIELDS, struct.unpack_from("<4sHHQIIQII", raw), strict=True))
    assert header["flags"] & ~13 == 0 and header["flags"] & 8, "not TERMS, or 64-bit ids"
    sized = bool(header["flags"] & 1)
    assert header["version"] == (4 if sized else 3) and (lengths is not None) == sized
    n, r, B = header["n_symbols"], header["n_runs"], header["record_bytes"]
    entries = [struct.unpack_from("<II", raw, 40 + 8 * k) for k in range(n)]
    at = 40 + 8 * n
    terms = []
    for _, count in entries:
        terms.append(list(struct.unpack_from(f"<{count}I", raw, at)))
        at += 4 * count
    runs = [struct.unpack_from("<III", raw, at + 12 * k) for k in range(r)]
    framing = at + 12 * r
    framing += -framing % 8
    crc_ok = zlib.crc32(raw[:32] + bytes(4) + raw[36:framing]) == header["header_crc"]
    sizes = [max(lengths[x] for x in t) if sized else B for t in terms]
    assert len(raw) == framing + sum(sizes) == framing + header["payload_bytes"], "payload length"
    ends = [framing + sum(sizes[: s + 1]) for s in range(n)]
    payload = [raw[e - z : e] for e, z in zip(ends, sizes, strict=True)]
    parts = {"header": header, "entries": entries, "terms": terms, "runs": runs, "payload": payload}
    return {**parts, "crc_ok": crc_ok}


def _bits(values, width: int) -> bytes:
    """``values`` end to end at ``width`` bits each, least significant bit first: one Python int."""
    number = sum(v << (i * width) for i, v in enumerate(values))
    return number.to_bytes((len(values) * width + 7) // 8, "little")


def _unbits(raw: bytes, width: int, n: int) -> list[int]:
    """The ``n`` values of ``width`` bits at the start of ``raw``, least significant bit first."""
    number = int.from_bytes(raw, "little")
    return [(number >> (i * width)) & ((1 << width) - 1) for i in range(n)]


def packed_terms_frame_reference(rows, offsets, terms, *, epoch, runs=(), sized=False) -> bytes:
    """A frame of many-term symbols of version 5 (flag TERMS; with VARIABLE for rows of many
    sizes, ``sized``) from docs/wire-format.md, with struct, zlib and Python ints: the header, the
    table's head (``n_terms`` u32, ``count_bits`` u8, ``id_bits`` u8, two zero bytes), the receiver
    index, each symbol's count of terms less one at ``count_bits`` bits, then the ids at ``id_bits``
    bits (each part padded to a byte), padding to 8, the payloads as in versions 3 and 4.
    """
    n = len(offsets) - 1
    width = max(len(r) for r in rows)
    counts = [offsets[s + 1] - offsets[s] for s in range(n)]
    count_bits = (max(counts, default=1) - 1).bit_length()
    id_bits = max(1, max(terms, default=0).bit_length())
    table = _bits([c - 1 for c in counts], count_bits) + _bits(list(terms), id_bits)
    index = b"".join(struct.pack("<III", *row) for row in runs)
    body = b"".join(
        xor_reference(rows, mine, max(len(rows[t]) for t in mine) if sized else width)
        for mine in (terms[offsets[s] : offsets[s + 1]] for s in range(n))
    )
    flags = 9 if sized else 8
    head = struct.pack("<4sHHQIIQII", b"CSHF", 5, flags, epoch, n, width, len(body), 0, len(runs))
    framing = head + struct.pack("<IBBH", len(terms), count_bits, id_bits, 0) + index + table
    framing += b"\0" * (-len(framing) % 8)
    crc = zlib.crc32(framing)
    return framing[:32] + struct.pack("<I", crc) + framing[36:] + body


def read_packed_terms_frame_reference(raw: bytes, lengths=None) -> dict:
    """The parts of a frame of many-term symbols of version 5, read with struct, zlib and Python
    ints: ``header``, ``table`` (``(n_terms, count_bits, id_bits)``), ``terms`` (one list a
    symbol), ``runs``, ``payload`` and ``crc_ok``. With flag VARIABLE it needs ``lengths``."""
    raw = bytes(raw)
    header = dict(zip(_HEADER_FIELDS, struct.unpack_from("<4sHHQIIQII", raw), strict=True))
    assert header["version"] == 5 and header["flags"] & ~13 == 0 and header["flags"] & 8
    sized = bool(header["flags"] & 1)
    assert (lengths is not None) == sized
    n, r, B = header["n_symbols"], header["n_runs"], header["record_bytes"]
    n_terms, count_bits, id_bits, reserved = struct.unpack_from("<IBBH", raw, 40)
    assert reserved == 0
    runs = [struct.unpack_from("<III", raw, 48 + 12 * k) for k in range(r)]
    at = 48 + 12 * r
    count_end = at + (n * count_bits + 7) // 8
    counts = [c + 1 for c in _unbits(raw[at:count_end], count_bits, n)]
    assert sum(counts) == n_terms, "the counts and the head disagree"
    end = count_end + (n_terms * id_bits + 7) // 8
    ids = _unbits(raw[count_end:end], id_bits, n_terms)
    terms = [ids[sum(counts[:s]) : sum(counts[: s + 1])] for s in range(n)]
    framing = end + (-end % 8)
    crc_ok = zlib.crc32(raw[:32] + bytes(4) + raw[36:framing]) == header["header_crc"]
    sizes = [max(lengths[x] for x in t) if sized else B for t in terms]
    assert len(raw) == framing + sum(sizes) == framing + header["payload_bytes"], "payload length"
    ends = [framing + sum(sizes[: s + 1]) for s in range(n)]
    payload = [raw[e - z : e] for e, z in zip(ends, sizes, strict=True)]
    parts = {"header": header, "table": (n_terms, count_bits, id_bits), "terms": terms, "runs": runs}
    return {**parts, "payload": payload, "crc_ok": crc_ok}


# --------------------------------------------------------------------------- epoch orders


def _epoch_generator(seed: int, epoch: int) -> np.random.Generator:
    """The stream of ``epoch``: child ``epoch`` of ``SeedSequence(seed)``, PCG64DXSM (as
    ``coded_shuffle.orders.permutation`` documents it)."""
    child = np.random.SeedSequence(seed).spawn(epoch + 1)[epoch]
    return np.random.Generator(np.random.PCG64DXSM(child))


def permutation_from_spec(N: int, *, seed: int, epoch: int) -> list[int]:
    """The epoch permutation: ``Generator.permutation(N)`` on the stream of ``epoch``.

    >>> sorted(permutation_from_spec(5, seed=0, epoch=1))
    [0, 1, 2, 3, 4]
    """
    return [int(v) for v in _epoch_generator(seed, epoch).permutation(N)]


def feistel_keys_from_spec(*, seed: int, epoch: int, rounds: int = 8) -> list[int]:
    """The round keys of the Feistel order: ``rounds`` uniform 64-bit words from the stream of
    ``epoch``."""
    keys = _epoch_generator(seed, epoch).integers(0, 1 << 64, size=rounds, dtype=np.uint64)
    return [int(k) for k in keys]


def feistel_from_spec(N: int, keys, idx, *, inverse: bool = False) -> list[int]:
    """``pi(i)`` (``pi^{-1}(i)`` with ``inverse``) for each ``i`` of ``idx``: the Feistel network of
    ``coded_shuffle.orders.feistel`` from its description, on Python ints, with cycle walking.

    The width ``w`` is the smallest ``w >= 2`` with ``2^w >= N``; round ``r`` splits ``x`` into a
    high part ``L`` of ``a`` bits and a low part ``R`` of ``b`` bits (``a, b = ceil(w/2),
    floor(w/2)`` for even ``r``, swapped for odd ``r``) and maps it to ``(R, L XOR F_r(R))``,
    ``F_r(R)`` the top ``a`` bits of ``fmix64(R XOR k_r)``; the inverse undoes the rounds in
    reverse order. Values at or above ``N`` are sent through the network again.

    >>> order = feistel_from_spec(6, [1, 2, 3, 4], range(6))
    >>> sorted(order), feistel_from_spec(6, [1, 2, 3, 4], order, inverse=True)
    ([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5])
    """
    w = max(2, (N - 1).bit_length())
    widths = (w - w // 2, w // 2)
    rounds = [(widths if r % 2 == 0 else widths[::-1], k) for r, k in enumerate(keys)]

    def network(x: int) -> int:
        for (a, b), k in reversed(rounds) if inverse else rounds:
            if inverse:  # x = (R, L XOR F(R)) -> (L, R)
                R, T = x >> a, x & ((1 << a) - 1)
                x = ((T ^ (fmix64(R ^ k) >> (64 - a))) << b) | R
            else:  # x = (L, R) -> (R, L XOR F(R))
                L, R = x >> b, x & ((1 << b) - 1)
                x = (R << a) | (L ^ (fmix64(R ^ k) >> (64 - a)))
        return x

    out = []
    for i in idx:
        x = network(int(i))
        while x >= N:
            x = network(x)
        out.append(x)
    return out


# --------------------------------------------------------------------------- excess storage


def brute_pieces(S, t):
    """Every missing piece ``(o, j, T)`` of ``S``, one per record moved ``o -> j`` and ``T``."""
    K = len(S)
    out = []
    for o, j in itertools.permutations(range(K), 2):
        for _ in range(int(S[o][j])):
            for T in itertools.combinations([w for w in range(K) if w not in (o, j)], t):
                out.append((o, j, frozenset(T)))
    return out


def brute_storage_bound(S, t):
    """Max over all orderings of the pieces whose holders all come after their wanter."""
    K = len(S)
    pieces = brute_pieces(S, t)
    best = 0
    for order in itertools.permutations(range(K)):
        pos = {w: n for n, w in enumerate(order)}
        best = max(best, sum(1 for o, j, T in pieces if all(pos[h] > pos[j] for h in T | {o})))
    return best


def gf2_decodable(plan) -> bool:
    """rank(G_k) == rank([G_k; E_need_k]) over GF(2) for every worker, from the plan's lists
    (``plan.storage``: ``N``, ``K``, ``pieces``, ``holders``; ``plan.transmissions``, ``plan.demand``)."""
    import galois

    from coded_shuffle.plan import holder_set  # one word a set, or rows of words beyond 64 workers

    GF2 = galois.GF2
    pp = plan.storage
    n = pp.N * pp.pieces
    T = np.zeros((len(plan.transmissions), n), dtype=np.uint8)
    for s, ids in enumerate(plan.transmissions):
        T[s, list(ids)] = 1
    eye = np.eye(n, dtype=np.uint8)
    for k in range(pp.K):
        held = [x for x in range(n) if holder_set(pp.holders[x // pp.pieces], x % pp.pieces) >> k & 1]
        need = [int(x) for x, j in plan.demand[:, :2].tolist() if j == k]
        G = np.vstack([T, eye[held]])
        r0 = np.linalg.matrix_rank(GF2(G))
        r1 = np.linalg.matrix_rank(GF2(np.vstack([G, eye[need]]))) if need else r0
        if r0 != r1:
            return False
    return True


def brute_upload_bound(holders, K):
    """The fractional optimum of the busiest upload: ``max over S of n(S) / |S|``, every subset.

    ``holders`` are bitmasks; ``n(S)`` counts those inside ``S`` (Hall's condition).
    """
    from fractions import Fraction

    best = Fraction(0)
    for r in range(1, K + 1):
        for S in itertools.combinations(range(K), r):
            inside = sum(1 for h in holders if int(h) & ~sum(1 << w for w in S) == 0)
            best = max(best, Fraction(inside, r))
    return best


def brute_min_max_upload(holders, K):
    """The least busiest upload over every choice of one holder a unit (small cases only)."""
    choices = [[w for w in range(K) if (int(h) >> w) & 1] for h in holders]
    best = None
    for pick in itertools.product(*choices):
        load = max((pick.count(w) for w in range(K)), default=0)
        best = load if best is None else min(best, load)
    return 0 if best is None else best
