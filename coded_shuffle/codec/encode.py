"""Encoding: XOR symbols, frames of a plan (:func:`encode_plan`) or of given pairs of ids."""

from __future__ import annotations

import zlib

import numpy as np

from .._checks import check_int, check_int_array
from ..plan import DeliveryPlan
from ._common import _NO_RUNS, _aligned_empty, _aligned_rows, _frame_cuts, _halves, _i64, _kernels, _ro
from .records import Cache, Dataset
from .wire import (
    _HEADER_DTYPE,
    _RUN_DTYPE,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_REPAIR,
    FLAG_VARIABLE,
    FLAG_WIDE_IDS,
    FRAME_HEADER_BYTES,
    RUN_BYTES,
    WIRE_MAGIC,
    _layout,
    frame_version,
)


def _check_symbol_ids(dataset: Dataset, a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    """Return ``a`` and ``b`` as int64 point ids of ``dataset`` (``b = -1``: none), or raise."""
    ai = check_int_array(a, "a", ndim=1).astype(np.int64)
    bi = check_int_array(b, "b", ndim=1).astype(np.int64)
    if ai.shape != bi.shape:
        raise ValueError(f"Argument 'b' must have the length of 'a', {ai.shape[0]}, not {bi.shape[0]}.")
    N = dataset.N
    if ai.size and (int(ai.min()) < 0 or int(ai.max()) >= N):
        raise ValueError(f"Argument 'a' must name records in [0, {N}).")
    if bi.size and (int(bi.min()) < -1 or int(bi.max()) >= N):
        raise ValueError(f"Argument 'b' must name records in [0, {N}) or be -1.")
    return ai, bi


def encode_symbols(dataset: Dataset, a: object, b: object, *, out: np.ndarray | None = None) -> np.ndarray:
    """Return the payload of each symbol ``x[a[s]] XOR x[b[s]]`` (``x[a[s]]`` when ``b[s] = -1``).

    Rows are ``B`` bytes wide (zero-padded for variable-length records).

    Parameters
    ----------
    dataset : Dataset
        The records.
    a, b : array_like
        Point ids of each symbol; ``b[s] = -1`` sends ``a[s]`` alone.
    out : numpy.ndarray, optional
        ``(len(a), B)`` ``uint8`` array to write into.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.array([[1, 2], [4, 8], [16, 32]], dtype=np.uint8))
    >>> encode_symbols(ds, [0, 2], [1, -1]).tolist()
    [[5, 10], [16, 32]]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    ai, bi = _check_symbol_ids(dataset, a, b)
    shape = (ai.shape[0], dataset.record_bytes)
    if out is None:
        out = _aligned_rows(*shape)
    elif not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.uint8:
        raise ValueError(f"Argument 'out' must be a uint8 array of shape {shape}.")
    _encode_into(out, dataset.data, ai, bi)
    return out


def _encode_into(out: np.ndarray, data: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``out[s] = data[a[s]] ^ data[b[s]]`` (``data[a[s]]`` when ``b[s] < 0``), compiled."""
    n = a.shape[0]
    args = (out, _ro(data), _i64(a), _i64(b))
    _halves(_kernels().encode_rows, args, 0, n, n * out.shape[1])


# --------------------------------------------------------------------------- wire format


def _pack(
    *,
    epoch: int,
    flags: int,
    width: int,
    symbol: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    data: np.ndarray,
    lengths: np.ndarray | None,
    runs: np.ndarray = _NO_RUNS,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """Build one frame, encoding the payload in place; ``runs`` is its receiver index.

    The entries name points ``a`` and ``b``; the payload is read from ``data`` (and ``lengths``)
    at those rows, or at ``rows`` for lone symbols (``b = -1``) of rows held under other ids.
    """
    n = a.shape[0]
    src = a if rows is None else rows
    if int(max(a.max(initial=0), b.max(initial=0), symbol.max(initial=0))) >= 0xFFFFFFFF:
        flags |= FLAG_WIDE_IDS
    n_runs = runs.shape[0]
    edt, start = _layout(n, flags, n_runs)
    none = np.iinfo(edt["b"]).max
    if lengths is None:
        payload_bytes = n * width
        plen = None
    else:
        len_a = lengths[src].astype(np.int64)
        len_b = np.where(b >= 0, lengths[np.maximum(b, 0)], 0).astype(np.int64)
        plen = np.maximum(len_a, len_b)
        payload_bytes = int(plen.sum())
    buf = _aligned_empty(start + payload_bytes, lead=start)
    buf[:start] = 0
    entries = buf[FRAME_HEADER_BYTES : FRAME_HEADER_BYTES + n * edt.itemsize].view(edt)
    entries["symbol"] = symbol
    entries["a"] = a
    entries["b"] = np.where(b >= 0, b, none) if n else b
    if n_runs:
        end = FRAME_HEADER_BYTES + n * edt.itemsize
        table = buf[end : end + n_runs * RUN_BYTES].view(_RUN_DTYPE)
        table["worker"] = runs[:, 0]
        table["first"] = runs[:, 1]
        table["count"] = runs[:, 2]
    if lengths is None:
        _encode_into(buf[start:].reshape(n, width), data, src, b)
    else:
        assert plen is not None
        entries["len_a"] = len_a
        entries["len_b"] = len_b
        offset = np.cumsum(plen) - plen
        args = (buf[start:], _i64(offset), _i64(plen), _ro(data), _i64(src), _i64(b))
        _halves(_kernels().encode_packed, args, 0, n, payload_bytes)
    _write_header(
        buf, start, flags=flags, epoch=epoch, n=n, width=width, payload_bytes=payload_bytes, n_runs=n_runs
    )
    return buf


def _write_header(
    buf: np.ndarray,
    start: int,
    *,
    flags: int,
    epoch: int,
    n: int,
    width: int,
    payload_bytes: int,
    n_runs: int,
) -> None:
    """Fill in the frame header of ``buf``, and last its CRC over ``buf[:start]`` (docs/wire-format.md)."""
    header = buf[:FRAME_HEADER_BYTES].view(_HEADER_DTYPE)
    header["magic"] = WIRE_MAGIC
    header["version"] = frame_version(flags)
    header["flags"] = flags
    header["epoch"] = epoch
    header["n_symbols"] = n
    header["record_bytes"] = width
    header["payload_bytes"] = payload_bytes
    header["n_runs"] = n_runs
    header["header_crc"] = zlib.crc32(buf[:start].data)  # computed with the crc field zero


def encode_plan_arrays(
    dataset: Dataset,
    a: object,
    b: object,
    *,
    epoch: int,
    symbol: object = None,
    repair: bool = False,
) -> np.ndarray:
    """Return one frame carrying the symbols ``x[a] XOR x[b]`` (``b = -1``: ``x[a]`` alone).

    Parameters
    ----------
    dataset : Dataset
        The master's records.
    a, b : array_like
        Point ids of each symbol.
    epoch : int
        Epoch whose batches the symbols deliver.
    symbol : array_like, optional
        Symbol numbers written in the entries (default ``0, 1, ...``).
    repair : bool
        Mark the frame as a repair.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> frame = encode_plan_arrays(ds, [1], [-1], epoch=3)
    >>> bytes(frame[:4]), len(frame)
    (b'CSHF', 58)
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=2**64 - 1)  # a u64 in the header
    ai, bi = _check_symbol_ids(dataset, a, b)
    if symbol is None:
        sym = np.arange(ai.shape[0], dtype=np.int64)
    else:
        sym = check_int_array(symbol, "symbol", ndim=1).astype(np.int64)
        if sym.shape != ai.shape or (sym.size and int(sym.min()) < 0):
            raise ValueError("Argument 'symbol' must hold one non-negative number per symbol.")
    flags = (FLAG_VARIABLE if dataset.variable else 0) | (FLAG_REPAIR if repair else 0)
    return _pack(
        epoch=epoch,
        flags=flags,
        width=dataset.record_bytes,
        symbol=sym,
        a=ai,
        b=bi,
        data=dataset.data,
        lengths=dataset.lengths,
    )


def encode_held(
    cache: Cache, ids: object, *, epoch: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> list[np.ndarray]:
    """Frames of the points ``ids`` alone, read from a worker's ``cache`` (a peer's sends).

    The frames are those :func:`encode_plan_arrays` makes of the same points sent alone
    (``b = -1``) from a dataset that holds them, cut every ``max_frame_bytes`` of payload: what
    a worker sends a peer in the exchange, decoded and checked by
    :func:`~coded_shuffle.codec.decode_worker` like every other frame. Raises KeyError when the
    cache does not hold one of ``ids``.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(4, 3))
    >>> [f] = encode_held(ds.cache([1, 3]), [3], epoch=2)
    >>> bytes(f) == bytes(encode_plan_arrays(ds, [3], [-1], epoch=2))
    True
    """
    if not isinstance(cache, Cache):
        raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=2**64 - 1)
    max_frame_bytes = check_int(max_frame_bytes, "max_frame_bytes", minimum=1)
    pts = check_int_array(ids, "ids", ndim=1).astype(np.int64)
    rows = cache.rows(pts)
    if rows.size and int(rows.min()) < 0:
        raise KeyError(f"point {int(pts[int(np.argmin(rows))])} is not in the cache")
    width = cache.width
    payload = None if cache.lengths is None else cache.lengths[rows]
    flags = FLAG_VARIABLE if cache.lengths is not None else 0
    data, lengths = cache.data, cache.lengths
    if cache.is_packed:  # only the records sent, in rows (not every record the cache holds)
        data, lengths, rows = cache.take(rows), payload, np.arange(rows.size, dtype=np.int64)
    return [
        _pack(
            epoch=epoch,
            flags=flags,
            width=width,
            symbol=np.arange(hi - lo, dtype=np.int64),
            a=pts[lo:hi],
            b=np.full(hi - lo, -1, dtype=np.int64),
            data=data,
            lengths=lengths,
            rows=rows[lo:hi],
        )  # fmt: skip
        for lo, hi in _frame_cuts(pts.size, width, max_frame_bytes, payload)
    ]


def _receiver_runs(plan: DeliveryPlan) -> np.ndarray:
    """The receiver index of the whole plan: rows ``(worker, first, count)`` over symbol numbers.

    Symbol ``s`` is addressed to the workers that use it: the two workers of an order-2 symbol,
    every worker of the cycle of a cycle symbol (each peels the whole chain), the receiver of a
    point sent alone. Rows are the maximal runs of consecutive symbols addressed to one worker,
    increasing in ``(worker, first)``. The plan keeps each group of order-2 symbols (one pair of
    workers) and of points sent alone (one receiver) together, so there are few rows.
    """
    if plan.n_symbols == 0:
        return _NO_RUNS

    def groups(*keys: np.ndarray) -> np.ndarray:
        """Starts of the runs of equal keys, and the end."""
        n = keys[0].shape[0]
        change = np.zeros(n, dtype=bool)
        change[:1] = True
        for key in keys:
            change[1:] |= key[1:] != key[:-1]
        return np.append(np.flatnonzero(change), n)

    P = plan.pair_x.shape[0]
    g = groups(plan.pair_i, plan.pair_j)
    first2, count2 = g[:-1], np.diff(g)
    rows = [
        (plan.pair_i[first2], first2, count2),
        (plan.pair_j[first2], first2, count2),
    ]
    q = plan.cycle_symbol_positions()
    n_c = q.shape[0]
    if n_c:
        ptr = plan.cycle_ptr
        use = np.searchsorted(ptr, q, side="right") - 1  # the cycle use of each cycle symbol
        per = np.diff(ptr)[use]  # its receivers: the workers of that use
        ends = np.cumsum(per)
        at = np.repeat(ptr[use] - (ends - per), per) + np.arange(int(ends[-1]))
        rows.append((plan.cycle_workers[at], np.repeat(P + np.arange(n_c), per), np.ones(at.size, np.int64)))
    g = groups(plan.uncoded_to)
    rows.append((plan.uncoded_to[g[:-1]], P + n_c + g[:-1], np.diff(g)))
    who, first, count = (np.concatenate([r[i] for r in rows]).astype(np.int64) for i in range(3))
    order = np.lexsort((first, who))
    who, first, count = who[order], first[order], count[order]
    end = first + count
    # Join runs of one worker that touch (or repeat: a worker twice in one cycle).
    start = np.ones(who.shape[0], dtype=bool)
    start[1:] = (who[1:] != who[:-1]) | (first[1:] > end[:-1])
    at = np.flatnonzero(start)
    last = np.maximum.reduceat(end, at)
    return np.stack([who[at], first[at], last - first[at]], axis=1)


def _clip_runs(runs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The rows of ``runs`` cut to the symbols ``[lo, hi)``, renumbered from ``lo``."""
    first = np.maximum(runs[:, 1], lo)
    end = np.minimum(runs[:, 1] + runs[:, 2], hi)
    keep = end > first
    return np.stack([runs[keep, 0], first[keep] - lo, end[keep] - first[keep]], axis=1)


def encode_plan(
    plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> list[np.ndarray]:
    """Encode every transmission of ``plan`` into frames of at most ``max_frame_bytes`` of payload.

    Symbol ``s`` is ``x[a[s]] XOR x[b[s]]`` for ``(a, b, phase) = plan.transmissions()``; the
    symbols keep their plan numbering across frames. Each frame carries a receiver index: the
    runs of its entries addressed to each worker (the two workers of an order-2 symbol, every
    worker of a cycle, the receiver of a point sent alone), so that a worker reads only those.

    Parameters
    ----------
    plan : DeliveryPlan
        The delivery plan of the transition ``t -> t + 1``.
    dataset : Dataset
        The master's ``N`` records.
    epoch : int
        The epoch ``t + 1`` written in the frame headers.
    max_frame_bytes : int
        Payload bytes per frame, at least the record width ``B``. Of records of many sizes each
        symbol is as long as its longer record, and a frame takes the symbols that fit.

    Returns
    -------
    list of numpy.ndarray
        The frames, as ``uint8`` buffers ready to send.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import load_dataset, parse_frame
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> ds = load_dataset(np.arange(15 * 8, dtype=np.uint8).reshape(15, 8))
    >>> frames = encode_plan(plan, ds, epoch=1)
    >>> [parse_frame(f).n_symbols for f in frames]
    [6]
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if plan.subpackets > 1 and dataset.N != plan.N * plan.subpackets:
        raise ValueError(
            f"Argument 'dataset' must hold the plan's N x subpackets = {plan.N * plan.subpackets} pieces "
            f"(piece k of record n in row n * {plan.subpackets} + k), not {dataset.N} rows."
        )
    if plan.subpackets == 1 and dataset.N != plan.N:
        raise ValueError(f"Argument 'dataset' must hold the plan's N = {plan.N} records, not {dataset.N}.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=2**64 - 1)  # a u64 in the header
    max_frame_bytes = check_int(max_frame_bytes, "max_frame_bytes", minimum=1)
    if max_frame_bytes < dataset.record_bytes:
        raise ValueError(
            f"Argument 'max_frame_bytes' must be at least the record width B = {dataset.record_bytes} "
            f"(a frame carries at least one symbol), not {max_frame_bytes}."
        )
    a, b, _ = plan.transmissions()
    n = a.shape[0]
    runs = _receiver_runs(plan)
    payload = None  # records of many sizes: a symbol is as long as its longer record
    if dataset.lengths is not None:
        payload = np.maximum(dataset.lengths[a], np.where(b >= 0, dataset.lengths[np.maximum(b, 0)], 0))
    cuts = _frame_cuts(n, dataset.record_bytes, max_frame_bytes, payload, empty=True)
    flags = FLAG_VARIABLE if dataset.variable else 0
    frames = []
    for lo, hi in cuts:
        frames.append(
            _pack(
                epoch=epoch,
                flags=flags,
                width=dataset.record_bytes,
                symbol=np.arange(lo, hi, dtype=np.int64),
                a=a[lo:hi],
                b=b[lo:hi],
                data=dataset.data,
                lengths=dataset.lengths,
                runs=runs if len(cuts) == 1 else _clip_runs(runs, lo, hi),
            )
        )
    return frames
