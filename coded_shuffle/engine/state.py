"""What the workers hold: their first caches, and the checks of their holdings against the master's.

Also the datasets the engine makes: :func:`synthetic_dataset` (random records) and the pieces of
sub-packets (:func:`pieces_dataset`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_int
from ..codec import Cache, Dataset, load_dataset
from ..orders import Placement, epoch_placement, placement_from_owner  # noqa: F401 (epoch_placement: doctests)

__all__ = [
    "initial_caches",
    "check_holdings",
    "check_caches",
    "synthetic_dataset",
    "pieces_dataset",
    "pieces_placement",
    "digest",
    "MIN_PIECE_BYTES",
    "storage_pieces",
    "sized_pieces",
    "piece_lengths",
    "storage_refusal",
    "storage_dataset",
    "records_of_pieces",
    "unit_lengths",
    "units_of",
]

#: Smallest piece a storage of ``M > 1`` batches cuts records into while it has more than one.
#: A piece costs on the wire (its ids in a frame's term table, docs/wire-format.md; 8 bytes a
#: symbol and 4 a piece it sums in version 3, when this was measured) and in decoding (a
#: worker's work goes by symbols and terms, not bytes); measured in docs/storage.md ("Fewer
#: pieces"), pieces of 1 KiB and more send no more bytes than a piece for every label, and decode
#: 2 to 4 times faster. Records too small for a piece of every label get fewer pieces, with
#: labels in turn (:func:`storage_pieces`), down to whole records.
MIN_PIECE_BYTES = 1024


def initial_caches(dataset: Dataset, placement: Placement) -> list[Cache]:
    """Return each worker's cache of epoch ``t``: copies of the records of its batch.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> [len(c) for c in initial_caches(ds, epoch_placement(4, 2, seed=0, epoch=0))]
    [2, 2]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if not isinstance(placement, Placement):
        raise TypeError(f"Argument 'placement' must be a Placement, not {type(placement).__name__}.")
    if placement.N != dataset.N:
        raise ValueError(
            f"Argument 'placement' must place the dataset's N = {dataset.N} records, not {placement.N}."
        )
    return [dataset.cache(placement.batch(k)) for k in range(placement.K)]


def check_holdings(
    dataset: Dataset,
    ids: Sequence[np.ndarray],
    checksums: Sequence[np.ndarray],
    placement: Placement,
    *,
    lengths: Sequence[np.ndarray | None] | None = None,
) -> tuple[int, bool]:
    """Check what the workers hold, as ids and checksums, against the master's ground truth.

    Worker ``k`` must hold exactly the ids of its batch in ``placement``, each with the record's
    load-time checksum; together the workers must hold each of the ``N`` records exactly once
    (conservation). For a dataset of variable-length records, ``lengths`` (each worker's record
    lengths) must be given and match. Used by :func:`check_caches` and, on what the workers
    posted, by the master's role of the transition protocol.

    Returns
    -------
    (int, bool)
        Records checked, and whether all checks passed.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> p = epoch_placement(4, 2, seed=0, epoch=0)
    >>> held = [p.batch(k) for k in range(2)]
    >>> check_holdings(ds, held, [ds.checksums[i] for i in held], p)
    (4, True)
    >>> check_holdings(ds, held[::-1], [ds.checksums[i] for i in held[::-1]], p)
    (4, False)
    """
    ok = len(ids) == len(checksums) == placement.K
    checked = 0
    for k, (held, sums) in enumerate(zip(ids[: placement.K], checksums[: placement.K], strict=False)):
        checked += int(held.size)
        ok &= bool(np.array_equal(held, placement.batch(k)) and np.array_equal(sums, dataset.checksums[held]))
    every = np.concatenate(list(ids)) if len(ids) else np.empty(0, np.int64)
    ok &= every.shape[0] == dataset.N and bool(np.array_equal(np.sort(every), np.arange(dataset.N)))
    sums_all = np.concatenate(list(checksums)) if len(checksums) else np.empty(0, np.uint64)
    ok &= bool(np.array_equal(np.sort(sums_all), np.sort(dataset.checksums)))
    if dataset.lengths is not None:
        ok &= lengths is not None and len(lengths) == len(ids)
        for held, lens in zip(ids, lengths or [], strict=False):
            ok &= lens is not None and bool(np.array_equal(lens, dataset.lengths[held]))
    return checked, bool(ok and checked == dataset.N)


def check_caches(dataset: Dataset, caches: list[Cache], placement: Placement) -> tuple[int, bool]:
    """Check every worker's records against the master's ground truth (:func:`check_holdings`).

    The checksums are recomputed from the bytes each worker holds; with variable-length records
    the lengths are checked too.

    Returns
    -------
    (int, bool)
        Records checked, and whether all checks passed.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> p = epoch_placement(4, 2, seed=0, epoch=0)
    >>> check_caches(ds, initial_caches(ds, p), p)
    (4, True)
    """
    return check_holdings(
        dataset,
        [c.ids for c in caches],
        [c.checksums() for c in caches],
        placement,
        lengths=[c.lengths for c in caches],
    )


def _spare_rows(
    spare: np.ndarray | Cache | None, cache: Cache, need: np.ndarray, *, sizes: np.ndarray | None = None,
    packs: bool = False,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The buffer of the new records ``need`` carved from a spare buffer of an earlier epoch, or
    None if it does not fit: ``(n, width)`` rows, and, when the spare is a cache of records of
    many sizes in rows of this width, the length past which each of those rows is zero (its
    records' lengths), or None; of a packed cache, for a scheme that decodes it packed
    (``packs``), the spare's 1-D buffer when it holds the new records' bytes (``sizes``: every
    record's)."""
    from ..codec._out import _writable_apart

    n, width = int(need.size), cache.width
    if cache.is_packed or (isinstance(spare, Cache) and spare.is_packed):
        buf = spare.buffer if isinstance(spare, Cache) else spare
        if not (packs and cache.is_packed and sizes is not None and _writable_apart(buf, cache)):
            return None, None
        assert isinstance(buf, np.ndarray)
        if buf.ndim != 1 or buf.size < int(np.asarray(sizes)[need].sum()):
            return None, None
        return buf, None
    zeroed = None
    if isinstance(spare, Cache):
        if spare.lengths is not None and spare.data.ndim == 2 and spare.width == width:
            zeroed = spare.lengths[:n]
        spare = spare.data
    if spare is None or not isinstance(spare, np.ndarray) or spare.dtype != np.uint8:
        return None, None
    if not spare.flags.c_contiguous or not spare.flags.writeable or spare.size < n * width:
        return None, None
    rows = spare.reshape(-1)[: n * width].reshape(n, width)
    if np.shares_memory(rows, cache.data):
        return None, None
    return rows, (None if cache.lengths is None else zeroed)


def pieces_dataset(dataset: Dataset, q: int) -> Dataset:
    """The dataset of the ``N q`` pieces: piece ``k`` of record ``n`` is row ``n q + k``."""
    if dataset.variable:
        raise ValueError(
            f"Argument 'subpackets' must be 1 for variable-length records (pieces need one size), not {q}."
        )
    if dataset.record_bytes % q:
        raise ValueError(
            f"Argument 'subpackets' must divide the record width of {dataset.record_bytes} bytes, not {q}."
        )
    return load_dataset(dataset.data.reshape(dataset.N * q, dataset.record_bytes // q))


def synthetic_dataset(N: int, record_bytes: int, *, seed: int) -> Dataset:
    """Return ``N`` random records of ``record_bytes`` bytes drawn from ``seed``.

    Examples
    --------
    >>> synthetic_dataset(5, 3, seed=0).data.shape
    (5, 3)
    """
    N = check_int(N, "N", minimum=1)
    record_bytes = check_int(record_bytes, "record_bytes", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    rng = np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(seed, spawn_key=(1 << 20,))))
    return load_dataset(rng.integers(0, 256, size=(N, record_bytes), dtype=np.uint8))


def pieces_placement(placement: Placement, q: int) -> Placement:
    """The placement of the ``N q`` pieces: the pieces of a record go where the record goes.

    Examples
    --------
    >>> pieces_placement(epoch_placement(2, 2, seed=0, epoch=0), 2).N
    4
    """
    return placement if q == 1 else placement_from_owner(np.repeat(placement.owner, q), placement.K)


def digest(cache: Cache) -> str:
    """A digest of the ids and bytes a worker holds (equal digests: same bytes).

    Examples
    --------
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> digest(ds.cache([1, 2])) == digest(ds.cache([1, 2])) != digest(ds.cache([1, 3]))
    True
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(cache.ids, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(cache.data).data)
    return h.hexdigest()


def storage_pieces(record_bytes: int, K: int, M: int) -> tuple[int, int]:
    """``(P, piece bytes)``: the pieces a record of ``record_bytes`` is cut into with a storage of
    ``M`` batches, and their width ``ceil(B / P)``.

    A piece for every label, ``P = C(K - 1, M - 1)``, while they are at least
    :data:`MIN_PIECE_BYTES`; else as many as keep them so (``B // MIN_PIECE_BYTES``), at least one:
    records under 2 KiB are stored whole, each on ``M`` workers (docs/storage.md, "Fewer pieces").
    Refuses, naming ``M``, a storage out of range (:func:`~coded_shuffle.storage.check_storage`).

    Examples
    --------
    >>> storage_pieces(8192, 8, 2), storage_pieces(4096, 16, 2), storage_pieces(100, 64, 2)
    ((7, 1171), (4, 1024), (1, 100))
    """
    from .._checks import check_int
    from ..storage import check_storage, pieces_per_record

    t = check_storage(M, K)
    B = check_int(record_bytes, "record_bytes", minimum=1)
    C = pieces_per_record(K, t)
    P = max(1, min(C, B // MIN_PIECE_BYTES))
    return P, -(-B // P)


def sized_pieces(sizes: object, K: int, M: int) -> int:
    """The pieces ``P`` every record of ``sizes`` (records of many sizes) is cut into with a
    storage of ``M`` batches: those of a record of their mean size (:func:`storage_pieces`), so
    that a piece is about :data:`MIN_PIECE_BYTES` or more on average; each record is then cut by
    its own length (:func:`piece_lengths`).

    Examples
    --------
    >>> sized_pieces([100, 900, 300], 8, 2), sized_pieces([2048, 20480], 8, 2)
    (1, 7)
    """
    lens = np.asarray(sizes, dtype=np.int64)
    if lens.ndim != 1 or lens.size < 1:
        raise ValueError("Argument 'sizes' must be a 1-D array of at least one record size.")
    return storage_pieces(max(1, -(-int(lens.sum()) // lens.size)), K, M)[0]


def piece_lengths(sizes: object, P: int) -> np.ndarray:
    """The length of each piece of records of ``sizes`` cut into ``P`` pieces by their own length:
    piece ``p`` of a record of ``L`` bytes is its bytes ``[p L // P, (p + 1) L // P)`` (row
    ``r P + p``), so the pieces of one record differ by at most a byte.

    Examples
    --------
    >>> piece_lengths([7, 2], 3).tolist()
    [2, 2, 3, 0, 1, 1]
    """
    L = np.asarray(sizes, dtype=np.int64)[:, None]
    cuts = (np.arange(P + 1, dtype=np.int64)[None, :] * L) // P
    return np.diff(cuts, axis=1).reshape(-1)


def storage_refusal(
    record_bytes: int | None, K: int, M: int, *, variable: bool = False, mode: str = "coded"
) -> str | None:
    """Why ``--storage M`` cannot cut these records, said of the option, or None when it can.

    Without ``record_bytes`` (not known yet) only ``M`` against ``K`` is checked. ``variable``:
    records of many sizes, which the coded scheme and the exchange (``mode``) cut by their own
    lengths (in process and across processes, every rank computing the pieces' lengths from the
    record sizes, :func:`piece_lengths`); another mode is refused, naming ``M``.

    Examples
    --------
    >>> storage_refusal(1024, 8, 9)
    '--storage must be at most K = 8 batches, not 9'
    >>> storage_refusal(1024, 8, 2, variable=True, mode="split").split(" (")[0]
    "--storage must be 1 for variable-length records with mode 'split'"
    """
    try:
        if variable and M != 1 and mode not in ("coded", "exchange"):
            raise ValueError(
                f"Argument 'M' (storage) must be 1 for variable-length records with mode {mode!r} "
                f"(only the coded scheme and the exchange cut them by their own lengths), not {M}"
            )
        if record_bytes is None:
            from ..storage import check_storage

            check_storage(M, K)
        else:
            storage_pieces(record_bytes, K, M)
    except (TypeError, ValueError) as exc:
        text = str(exc).replace("Argument 'M' (storage) = ", "--storage ")
        return text.replace("Argument 'M' (storage)", "--storage").rstrip(".")
    return None


def storage_dataset(dataset: Dataset, K: int, M: int, *, pieces: int | None = None) -> Dataset:
    """The dataset of the pieces of a storage of ``M`` batches: row ``r P + p`` is piece ``p`` of ``r``.

    A record of ``B`` bytes is zero-padded to ``P ceil(B / P)`` bytes and cut into ``P = pieces``
    pieces (default: one for every label, ``C(K - 1, M - 1)``, as
    :func:`~coded_shuffle.storage.piece_placement`; the engine passes those of
    :func:`storage_pieces`); every piece gets its checksum. Records of many sizes are cut by
    their own lengths (:func:`piece_lengths`), each piece a zero-padded row of the longest
    piece's width with its length beside.

    Examples
    --------
    >>> ds = load_dataset(np.zeros((4, 900), dtype=np.uint8))
    >>> storage_dataset(ds, 4, 2).data.shape  # C(3, 1) = 3 pieces of 300 bytes
    (12, 300)
    >>> storage_dataset(load_dataset([b"abcde", b"xy"]), 3, 2).lengths.tolist()
    [2, 3, 1, 1]
    """
    from ..storage import check_storage, pieces_per_record

    B = dataset.record_bytes
    P = pieces_per_record(K, check_storage(M, K)) if pieces is None else pieces
    width = -(-B // P)
    if P == 1:
        return dataset
    if dataset.lengths is not None:
        return _sized_pieces_dataset(dataset, P)
    if width * P == B:
        data = dataset.data.reshape(dataset.N * P, width)
    else:
        data = np.zeros((dataset.N, width * P), dtype=np.uint8)
        data[:, :B] = dataset.data
        data = data.reshape(dataset.N * P, width)
    return load_dataset(data)


def _sized_pieces_dataset(dataset: Dataset, P: int) -> Dataset:
    """The pieces of records of many sizes, each cut by its own length (:func:`piece_lengths`)."""
    from ..codec import record_checksums
    from ..codec._common import _kernels, _readonly, _ro

    assert dataset.lengths is not None
    N, B = dataset.N, dataset.record_bytes
    lens = piece_lengths(dataset.lengths, P)
    starts = np.cumsum(lens) - lens - np.repeat(np.cumsum(dataset.lengths) - dataset.lengths, P)
    starts += np.repeat(np.arange(N, dtype=np.int64) * B, P)  # in the rows laid end to end
    data = np.empty((N * P, max(1, int(lens.max()))), dtype=np.uint8)
    flat = _ro(np.ascontiguousarray(dataset.data).reshape(-1))
    _kernels().take_spans(data, np.arange(N * P, dtype=np.int64), flat, starts, lens)
    data.flags.writeable = False
    sums = record_checksums(data, lens)
    return Dataset(data=data, lengths=_readonly(lens), checksums=_readonly(sums))


def records_of_pieces(cache: Cache, records: np.ndarray, pieces: int, record_bytes: int) -> np.ndarray:
    """The rows of ``records`` (ids, increasing) rebuilt whole from the pieces a worker holds
    (pieces of many sizes, a cache with lengths: each cut to its length, end to end, zero-padded
    to ``record_bytes``).

    Examples
    --------
    >>> ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(6, 2))  # 3 records, 2 pieces each
    >>> records_of_pieces(ds.cache([2, 3, 4, 5]), np.array([1, 2]), 2, 3).tolist()
    [[4, 5, 6], [8, 9, 10]]
    >>> sized = storage_dataset(load_dataset([b"abcde", b"xy"]), 3, 2)
    >>> records_of_pieces(sized.cache([0, 1, 2, 3]), np.array([0, 1]), 2, 5).tolist()[1]
    [120, 121, 0, 0, 0]
    """
    ids = (records[:, None] * pieces + np.arange(pieces)[None, :]).reshape(-1)
    rows = cache.rows(ids)
    if rows.size and int(rows.min()) < 0:
        missing = int(ids[int(np.argmin(rows))])
        raise KeyError(f"piece {missing} (record {missing // pieces}) is not held")
    width = cache.width
    if cache.lengths is None or pieces == 1:
        return cache.data[rows].reshape(records.size, pieces * width)[:, :record_bytes]
    lens = cache.lengths[rows].reshape(records.size, pieces)
    out = np.zeros((records.size, record_bytes), dtype=np.uint8)
    at = np.cumsum(lens, axis=1) - lens  # where each piece starts in its record
    col = np.arange(width)
    for p in range(pieces):
        i, c = np.nonzero(col[None, :] < lens[:, p : p + 1])
        out[i, at[i, p] + c] = cache.data[rows[i * pieces + p], c]
    return out


def unit_lengths(scheme: Any) -> np.ndarray | None:
    """The length of every unit of ``scheme`` where its placement model cuts records of many sizes
    into pieces by their own lengths (every rank computes them from the record sizes, the
    :attr:`~coded_shuffle.engine.holding.PieceStorage.unit_lengths`), else None.

    Examples
    --------
    >>> from coded_shuffle.engine import scheme_for
    >>> unit_lengths(scheme_for("coded", K=3, storage=2, sizes=[3000, 1101])).tolist()
    [1500, 1500, 550, 551]
    >>> unit_lengths(scheme_for("coded", K=3)) is None
    True
    """
    return getattr(getattr(scheme, "holding", None), "unit_lengths", None)


def units_of(scheme: Any, source: Any, held: Any, worker: int, width: int) -> Cache:
    """The units ``worker`` holds under ``held`` in ``scheme``, rows of ``width`` bytes cut from
    its own read of the records ``source`` (a record source: ``gather(ids)`` returns their rows):
    whole records, or the pieces of a storage (records of many sizes each cut by its own length,
    :func:`storage_dataset`, as on every rank).

    Examples
    --------
    >>> from coded_shuffle.engine import scheme_for
    >>> class Source:  # what a record source of records of many sizes gives
    ...     record_bytes, sizes = None, [3000, 1101, 2100]
    ...     def gather(self, ids):  # zero-padded rows
    ...         return np.array([[i + 1] * self.sizes[i] + [0] * (3000 - self.sizes[i]) for i in ids], "u1")
    >>> s = scheme_for("coded", K=3, storage=2, sizes=Source.sizes)  # 2 pieces a record
    >>> held = s.holding.start(epoch_placement(3, 3, seed=0, epoch=0))
    >>> mine = units_of(s, Source(), held, 0, 1500)
    >>> mine.ids.tolist(), mine.lengths.tolist(), mine.data.shape
    ([0, 2, 4, 5], [1500, 550, 1050, 1050], (4, 1500))
    >>> bool((mine.data[1, :550] == 2).all() and (mine.data[1, 550:] == 0).all())  # zero-padded
    True

    A worker that holds nothing this epoch (a slot past ``K_t`` of
    :class:`~coded_shuffle.engine.elastic_epochs.ElasticSchedule`) has no rows, and reads none:

    >>> one = scheme_for("coded", K=3)
    >>> none = units_of(one, Source(), one.start(placement_from_owner([0, 1, 0], 3)), 2, 3000)
    >>> len(none), none.data.shape, none.lengths.tolist()
    (0, (0, 3000), [])
    """
    ids = scheme.held(held, worker)
    known = unit_lengths(scheme)
    if ids.size == 0:  # a worker that holds nothing this epoch (it joins at the next)
        lengths = None if source.record_bytes is not None and known is None else np.empty(0, np.int64)
        return Cache(ids=ids, data=np.zeros((0, width), dtype=np.uint8), lengths=lengths)
    if source.record_bytes is None and known is None:  # whole, with their lengths
        sizes = np.asarray(source.sizes)[ids]
        if scheme.packs:  # end to end, as the scheme decodes them
            return Cache.gathered(source, ids, sizes, width)
        return Cache(ids=ids, data=source.gather(ids), lengths=sizes)
    C = scheme.pieces
    mine = np.unique(ids // C)
    if known is None:
        local = scheme.dataset(load_dataset(source.gather(mine), checksums=False))
    else:  # these records' pieces, each record cut by its own length as on every rank
        sizes = np.asarray(source.sizes, dtype=np.int64)[mine]
        rows = Dataset(data=source.gather(mine), lengths=sizes, checksums=np.zeros(mine.size, np.uint64))
        local = storage_dataset(rows, scheme.holding.K, scheme.M, pieces=C)
    pick = np.searchsorted(mine, ids // C) * C + ids % C
    data = np.zeros((ids.size, width), dtype=np.uint8)
    data[:, : local.data.shape[1]] = local.data[pick]
    return Cache(ids=ids, data=data, lengths=None if known is None else known[ids])
