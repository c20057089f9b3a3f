"""The wire format: constants, the frame header, :class:`Frame` and :func:`parse_frame`
(docs/wire-format.md)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .._checks import check_int
from ..errors import DecodeError
from ._common import _NO_RUNS, _kernels, _readonly
from .table import TermLayout, read_table, term_layout

#: First four bytes of every frame.
WIRE_MAGIC = b"CSHF"
#: Version of the wire format this module writes and reads (:doc:`docs/wire-format.md`). A frame's
#: header holds the version a reader needs for it: :data:`PACKED_TERMS_VERSION` for a frame with
#: :data:`FLAG_TERMS`, :data:`PAIRS_VERSION` for every other (byte for byte a version 2 frame).
WIRE_VERSION = 5
#: The version written in the header of a frame of pairs (no :data:`FLAG_TERMS`).
PAIRS_VERSION = 2
#: The version of the frames of many-term symbols written before version 5 (:data:`FLAG_TERMS`,
#: an entry of 8 bytes a symbol and 4 a term): read, no longer written.
TERMS_VERSION = 3
#: The version of the frames of many-term symbols of rows of many sizes written before version 5
#: (:data:`FLAG_TERMS` with :data:`FLAG_VARIABLE`, the table of version 3): read, no longer written.
VARIABLE_TERMS_VERSION = 4
#: The version of a frame of many-term symbols (:data:`FLAG_TERMS`, with or without
#: :data:`FLAG_VARIABLE`): its term table packed at the fewest bits (:mod:`.table`).
PACKED_TERMS_VERSION = 5
#: Size of the fixed frame header in bytes.
FRAME_HEADER_BYTES = 40
#: Flag: records have variable lengths; entries carry ``len_a`` and ``len_b``.
FLAG_VARIABLE = 1
#: Flag: point ids are 64-bit (otherwise 32-bit).
FLAG_WIDE_IDS = 2
#: Flag: the frame re-sends points uncoded after a failed check (a repair).
FLAG_REPAIR = 4
#: Flag: each symbol is the XOR of any number of rows (pieces), listed in a term table.
FLAG_TERMS = 8
_KNOWN_FLAGS = FLAG_VARIABLE | FLAG_WIDE_IDS | FLAG_REPAIR | FLAG_TERMS

_HEADER_DTYPE = np.dtype(
    [
        ("magic", "S4"),
        ("version", "<u2"),
        ("flags", "<u2"),
        ("epoch", "<u8"),
        ("n_symbols", "<u4"),
        ("record_bytes", "<u4"),
        ("payload_bytes", "<u8"),
        ("header_crc", "<u4"),
        ("n_runs", "<u4"),
    ]
)
assert _HEADER_DTYPE.itemsize == FRAME_HEADER_BYTES
#: One row of the receiver index: entries ``[first, first + count)`` are addressed to ``worker``.
_RUN_DTYPE = np.dtype([("worker", "<u4"), ("first", "<u4"), ("count", "<u4")])
#: Bytes of one row of the receiver index.
RUN_BYTES = _RUN_DTYPE.itemsize


DEFAULT_MAX_FRAME_BYTES = 1 << 26


def _entry_dtype(flags: int) -> np.dtype:
    """The entry of a symbol of a frame of pairs."""
    idt = "<u8" if flags & FLAG_WIDE_IDS else "<u4"
    fields = [("symbol", idt), ("a", idt), ("b", idt)]
    if flags & FLAG_VARIABLE:
        fields += [("len_a", "<u4"), ("len_b", "<u4")]
    return np.dtype(fields)


@dataclass(frozen=True, eq=False)
class Frame:
    """One parsed frame: the symbols it carries and their payloads.

    Attributes
    ----------
    epoch : int
        Epoch ``t + 1`` whose batches the symbols deliver.
    flags : int
        ``FLAG_VARIABLE | FLAG_WIDE_IDS | FLAG_REPAIR`` bits.
    record_bytes : int
        Width ``B`` of a payload row.
    symbol, a, b : numpy.ndarray
        ``int64`` symbol numbers and point ids (``b = -1`` for a point sent alone); ``a`` and
        ``b`` are empty in a frame of many-term symbols (``terms``), whose symbols version 5
        numbers by their place in the frame (0, 1, ...: no reader needs the plan's order).
    len_a, len_b : numpy.ndarray or None
        Record lengths (variable-length records only; ``len_b = 0`` when ``b = -1``).
    payload : numpy.ndarray
        ``(n_symbols, B)`` ``uint8`` rows (zero-padded past ``max(len_a, len_b)``).
    wire_bytes : int
        Size of the frame on the wire.
    runs : numpy.ndarray
        The receiver index: ``int64`` rows ``(worker, first, count)``, increasing in ``(worker,
        first)``, each saying that entries ``[first, first + count)`` are addressed to ``worker``.
        Empty when the frame has no index: then every entry is addressed to every worker.
    offsets, terms : numpy.ndarray or None
        Frames with :data:`FLAG_TERMS` only: symbol ``s`` is the XOR of the rows
        ``terms[offsets[s]:offsets[s + 1]]`` (``int64``, ``offsets`` of length ``n + 1``).
    packed : numpy.ndarray or None
        Set only in the frames a worker's decoding parses for itself, of variable-length records:
        the payloads end to end as received, ``payload`` then empty (the decoder unpacks the
        entries addressed to the worker alone), or by :func:`parse_frame` with ``unpack=False``.
        Always set in a frame of many-term symbols of rows of many sizes (``FLAG_VARIABLE``), whose
        ``payload`` rows are unpacked only when :func:`parse_frame` is given the rows' lengths.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> ds = load_dataset(np.eye(3, dtype=np.uint8))
    >>> f = parse_frame(encode_plan_arrays(ds, [0], [1], epoch=1))
    >>> f.a.tolist(), f.b.tolist(), f.payload.tolist(), f.runs.shape
    ([0], [1], [[1, 1, 0]], (0, 3))
    """

    epoch: int
    flags: int
    record_bytes: int
    symbol: np.ndarray
    a: np.ndarray
    b: np.ndarray
    len_a: np.ndarray | None
    len_b: np.ndarray | None
    payload: np.ndarray
    wire_bytes: int
    runs: np.ndarray = field(default_factory=lambda: _NO_RUNS)
    offsets: np.ndarray | None = None
    terms: np.ndarray | None = None
    packed: np.ndarray | None = None

    @property
    def n_symbols(self) -> int:
        """Number of symbols in the frame."""
        return int(self.symbol.shape[0])

    @property
    def header_bytes(self) -> int:
        """Bytes of framing: fixed header, entries and alignment padding."""
        return self.wire_bytes - self.payload_bytes

    @property
    def payload_bytes(self) -> int:
        """Bytes of symbol payload on the wire."""
        if self.packed is not None and self.terms is not None:  # rows of many sizes: as received
            return int(self.packed.shape[0])
        if self.len_a is None or self.len_b is None:
            return self.n_symbols * self.record_bytes
        return int(np.maximum(self.len_a, self.len_b).sum())


def _layout(n: int, flags: int, n_runs: int = 0) -> tuple[np.dtype, int]:
    """The entry dtype and the offset of the payload of a frame of pairs: header, entries,
    receiver index, padding."""
    edt = _entry_dtype(flags)
    start = FRAME_HEADER_BYTES + n * edt.itemsize + n_runs * RUN_BYTES
    return edt, start + (-start % 8)


def entry_bytes(flags: int = 0) -> tuple[int, int]:
    """Bytes of one symbol's entry in a frame of pairs of ``flags``, and 0 (no term table): what
    docs/wire-format.md lays out, read from the layout itself. A frame of many-term symbols
    (:data:`FLAG_TERMS`) packs its table at bit widths of its own
    (:func:`~coded_shuffle.codec.table.packed_framing`): a ValueError.

    >>> entry_bytes(), entry_bytes(FLAG_VARIABLE), entry_bytes(FLAG_VARIABLE | FLAG_WIDE_IDS)
    ((12, 0), (20, 0), (32, 0))
    """
    if flags & FLAG_TERMS:
        raise ValueError(
            "Argument 'flags' must name a frame of pairs: a frame of many-term symbols (FLAG_TERMS) "
            "packs its term table at bit widths of its own."
        )
    return int(_entry_dtype(flags).itemsize), 0


def frame_version(flags: int) -> int:
    """The version a reader needs for a frame with ``flags`` (the one written in its header).

    >>> frame_version(0), frame_version(FLAG_TERMS), frame_version(FLAG_TERMS | FLAG_VARIABLE)
    (2, 5, 5)
    """
    return PACKED_TERMS_VERSION if flags & FLAG_TERMS else PAIRS_VERSION


def _versions(flags: int) -> tuple[int, ...]:
    """The versions a reader reads a frame with ``flags`` in: those written before too."""
    if not flags & FLAG_TERMS:
        return (PAIRS_VERSION,)
    if flags & FLAG_WIDE_IDS:  # version 5 gives the ids' width in its table
        return (VARIABLE_TERMS_VERSION if flags & FLAG_VARIABLE else TERMS_VERSION,)
    return (VARIABLE_TERMS_VERSION if flags & FLAG_VARIABLE else TERMS_VERSION, PACKED_TERMS_VERSION)


def symbol_lengths(offsets: np.ndarray, terms: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The payload length of each many-term symbol of rows of ``lengths``: its longest term's.

    >>> symbol_lengths(np.array([0, 2, 3]), np.array([0, 1, 2]), np.array([5, 9, 4])).tolist()
    [9, 4]
    """
    if int(offsets.shape[0]) < 2:
        return np.zeros(0, dtype=np.int64)
    return np.maximum.reduceat(np.asarray(lengths, dtype=np.int64)[terms], offsets[:-1]).astype(np.int64)


def frame_overhead(
    n_symbols: int, record_bytes: int, *, variable: bool = False, wide_ids: bool = False
) -> float:
    """Return framing bytes over payload bytes of a frame of ``n_symbols`` full-width symbols.

    The frame has no receiver index; each row of one adds :data:`RUN_BYTES` of framing. A frame
    of pairs; that of many-term symbols is :func:`~coded_shuffle.codec.table.packed_framing`.

    Examples
    --------
    >>> round(frame_overhead(1000, 4096), 5)
    0.00294
    """
    n_symbols = check_int(n_symbols, "n_symbols", minimum=1)
    record_bytes = check_int(record_bytes, "record_bytes", minimum=1)
    flags = (FLAG_VARIABLE if variable else 0) | (FLAG_WIDE_IDS if wide_ids else 0)
    _, start = _layout(n_symbols, flags)
    return start / (n_symbols * record_bytes)


class FrameSizes(NamedTuple):
    """What a frame's header says of it: its symbols, and its bytes of payload and of framing."""

    n_symbols: int
    payload_bytes: int
    header_bytes: int


def frame_sizes(frame: np.ndarray) -> FrameSizes:
    """The symbols and the payload of ``frame`` as its header states them, and the rest of its
    bytes as framing; read from the header alone (neither parsed nor checked, so the counts of
    a frame just encoded cost nothing). A buffer shorter than a header is framing alone.

    Examples
    --------
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> f = encode_plan_arrays(load_dataset(np.eye(3, dtype=np.uint8)), [0, 1], [2, -1], epoch=0)
    >>> frame_sizes(f)
    FrameSizes(n_symbols=2, payload_bytes=6, header_bytes=...)
    >>> p = parse_frame(f)
    >>> frame_sizes(f) == (p.n_symbols, p.payload_bytes, p.header_bytes)
    True
    """
    size = int(frame.shape[0])
    header = _header(frame)
    if header is None:
        return FrameSizes(0, 0, size)
    payload = int(header["payload_bytes"])
    return FrameSizes(int(header["n_symbols"]), payload, size - payload)


def frame_flags(frame: np.ndarray) -> int:
    """The flags a frame's header states (0 for a buffer shorter than a header); not checked.

    Examples
    --------
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> ds = load_dataset(np.eye(3, dtype=np.uint8))
    >>> frame_flags(encode_plan_arrays(ds, [0], [-1], epoch=0, repair=True))
    4
    """
    header = _header(frame)
    return 0 if header is None else int(header["flags"])


#: The receivers of a frame's framing (header, entries, index), and of a symbol read by all.
EVERY_WORKER = -1


def frame_scopes(frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Who reads each byte of ``frame``: ``(bounds, receivers)``, the frame cut at ``bounds``
    (``int64``, from 0 to its size) into spans, span ``i`` read by the workers of the bit mask
    ``receivers[i]`` (bit ``k``: worker ``k``), or by every worker (:data:`EVERY_WORKER`).

    The framing (header, entries, receiver index, padding) is every worker's: each parses the
    whole frame. The payload of a symbol belongs to the workers its receiver index names (the two
    of an order-2 symbol, every worker of a cycle, the receiver of a point sent alone). A frame
    without an index, a frame of many-term symbols, or one naming workers beyond 62, is every
    worker's, whole. Neighbouring spans of one mask are one span. Read from the frame alone (it
    is parsed and checked): what a multicast sender needs to send each span to its readers only.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan, load_dataset
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[0, 1, 0], [1, 0, 0], [0, 0, 0]])   # workers 0 and 1 swap one record
    >>> (frame,) = encode_plan(plan, load_dataset(np.zeros((2, 8), np.uint8)), epoch=1)
    >>> bounds, receivers = frame_scopes(frame)
    >>> bounds.tolist(), receivers.tolist()     # the framing for all, the XOR for workers 0 and 1
    ([0, 80, 88], [-1, 3])
    """
    f = parse_frame(frame)
    size = f.wire_bytes
    start = size - f.payload_bytes
    everyone = (np.array([0, size], dtype=np.int64), np.array([EVERY_WORKER], dtype=np.int64))
    if f.terms is not None or f.runs.shape[0] == 0 or f.n_symbols == 0 or int(f.runs[:, 0].max()) > 62:
        return everyone
    who, first, count = f.runs[:, 0], f.runs[:, 1], f.runs[:, 2]
    mask = np.zeros(f.n_symbols, dtype=np.int64)
    at = np.repeat(first - np.concatenate(([0], np.cumsum(count)[:-1])), count) + np.arange(int(count.sum()))
    np.bitwise_or.at(mask, at, np.repeat(np.left_shift(1, who), count))
    mask[mask == 0] = EVERY_WORKER  # an entry no run names is addressed to no one: send it to all
    width = (
        np.full(f.n_symbols, f.record_bytes, np.int64)
        if f.len_a is None or f.len_b is None
        else np.maximum(f.len_a, f.len_b)
    )
    ends = start + np.cumsum(width)
    change = np.flatnonzero(mask[1:] != mask[:-1])  # a span ends after these symbols
    bounds = np.concatenate(([0, start], ends[change], [size])).astype(np.int64)
    receivers = np.concatenate(([EVERY_WORKER], mask[np.concatenate(([0], change + 1))]))
    new = np.concatenate(([True], receivers[1:] != receivers[:-1]))  # a span of the framing's mask
    return np.append(bounds[:-1][new], size), receivers[new]


def _header(frame: np.ndarray) -> Any:
    """The fixed header of ``frame`` as a record of :data:`_HEADER_DTYPE`, unchecked; None for a
    buffer shorter than a header."""
    if int(frame.shape[0]) < FRAME_HEADER_BYTES:
        return None
    return np.frombuffer(frame[:FRAME_HEADER_BYTES].tobytes(), dtype=_HEADER_DTYPE)[0]


def parse_frame(
    buf: object, *, epoch: int | None = None, record_bytes: int | None = None, unpack: bool = True,
    lengths: object = None,
) -> Frame:  # fmt: skip
    """Parse and check one frame; payload rows are views into ``buf`` for fixed-size records.

    Parameters
    ----------
    buf : bytes-like or numpy.ndarray
        The frame as received.
    epoch : int, optional
        The epoch the receiver expects; a different one is rejected.
    record_bytes : int, optional
        The record width the receiver expects; a different one is rejected.
    unpack : bool
        Records of many sizes: unpack every payload into a zero-padded row of the record width
        (default). ``False`` leaves them as received (:attr:`Frame.packed`, ``payload`` empty),
        which is all :func:`~coded_shuffle.codec.decode_worker` needs: it reads the entries
        addressed to its worker in place, where unpacking costs every worker the whole frame
        at the widest width.
    lengths : array_like, optional
        A frame of many-term symbols of rows of many sizes (``FLAG_VARIABLE``): the length of every row
        (indexed by row id), which sets each payload's length (its longest term's); with it the
        payloads are checked against the entries and unpacked, without it they stay packed.

    Raises
    ------
    DecodeError
        If the frame is short, has a wrong magic, version, header checksum, epoch, record width
        or payload length, names ids out of range of its flags, or has a receiver index whose
        runs leave the entries, are empty, or are not increasing and disjoint for each worker.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> f = parse_frame(encode_plan_arrays(ds, [0], [1], epoch=5), epoch=5)
    >>> f.epoch, f.n_symbols, f.payload.tolist()
    (5, 1, [[1, 1]])
    """
    if not isinstance(unpack, bool):
        raise TypeError(f"Argument 'unpack' must be a bool, not {type(unpack).__name__}.")
    lens = None if lengths is None else np.asarray(lengths, dtype=np.int64).reshape(-1)
    return _parse(buf, epoch=epoch, record_bytes=record_bytes, unpack=unpack, lengths=lens)


def _parse(
    buf: object,
    *,
    epoch: int | None,
    record_bytes: int | None,
    unpack: bool,
    lengths: np.ndarray | None = None,
) -> Frame:
    """:func:`parse_frame`; without ``unpack`` the payloads of variable-length records stay packed
    (:attr:`Frame.packed`), for a decoder that reads only some of them."""
    raw = _frame_bytes(buf)
    header, start, lay = _check_header(raw, epoch=epoch, record_bytes=record_bytes)
    flags, n, width = int(header["flags"]), int(header["n_symbols"]), int(header["record_bytes"])
    if lay is not None:
        return _parse_terms(raw, header, lay, start, lengths=lengths if unpack else None)
    size = _entry_dtype(flags).itemsize
    end = FRAME_HEADER_BYTES + n * size
    runs = _receiver_index(raw[end : end + int(header["n_runs"]) * RUN_BYTES], n)
    table = raw[FRAME_HEADER_BYTES:end].reshape(n, size)
    table.flags.writeable = False  # one compiled type, whatever the buffer received
    variable = bool(flags & FLAG_VARIABLE)
    kernels = _kernels()
    symbol, a, b, len_a, len_b, expected, status = kernels.parse_pairs(
        table, bool(flags & FLAG_WIDE_IDS), variable, width
    )
    if status == kernels.BAD_ID:
        raise DecodeError("Frame rejected: point id out of range.")
    if status == kernels.BAD_LENGTH:
        raise DecodeError("Frame rejected: record lengths exceed the record width.")
    if not variable:
        len_a = len_b = None
    payload_bytes = int(header["payload_bytes"])
    if payload_bytes != expected or raw.shape[0] != start + payload_bytes:
        raise DecodeError(
            f"Frame rejected: payload of {raw.shape[0] - start} bytes, header says {payload_bytes}, "
            f"entries say {expected}."
        )
    body = raw[start:]
    packed = None
    if len_a is not None and len_b is not None:
        if unpack:
            payload = _unpacked(body, np.maximum(len_a, len_b), width)
        else:
            payload, packed = np.empty((0, width), dtype=np.uint8), body
    else:
        payload = body.reshape(n, width)
    return Frame(
        epoch=int(header["epoch"]),
        flags=flags,
        record_bytes=width,
        symbol=symbol,
        a=a,
        b=b,
        len_a=len_a,
        len_b=len_b,
        payload=payload,
        wire_bytes=int(raw.shape[0]),
        runs=runs,
        packed=packed,
    )


def _unpacked(
    body: np.ndarray,
    plen: np.ndarray,
    width: int,
    rows: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The payloads of lengths ``plen``, end to end in ``body``, as ``(n, width)`` rows zero-padded
    (only the entries ``rows``, in that order, if given; into ``out`` if given): one compiled pass
    (:func:`coded_shuffle._codec_kernels.take_spans`), each row written once."""
    plen = plen.astype(np.int64)
    starts = np.cumsum(plen) - plen
    if rows is not None:
        starts, plen = starts[rows], plen[rows]
    n = int(plen.shape[0])
    payload = np.empty((n, width), dtype=np.uint8) if out is None else out
    if n:
        view = body.view()
        view.flags.writeable = False  # one compiled type, whatever the buffer received
        _kernels().take_spans(payload, np.arange(n, dtype=np.int64), view, starts, plen)
    return payload


def _parse_terms(
    raw: np.ndarray, header: Any, lay: TermLayout, start: int, *, lengths: np.ndarray | None = None
) -> Frame:
    """The rest of :func:`parse_frame` for a frame with :data:`FLAG_TERMS` (with
    :data:`FLAG_VARIABLE`, its payloads unpacked by the rows' ``lengths`` when given)."""
    flags, n, width = int(header["flags"]), int(header["n_symbols"]), int(header["record_bytes"])
    symbol, offsets, terms = read_table(raw, lay, flags, n)
    at = lay.index_at
    runs = _receiver_index(raw[at : at + int(header["n_runs"]) * RUN_BYTES], n)
    payload_bytes = int(header["payload_bytes"])
    packed, payload, expected = None, raw[start:], n * width
    if flags & FLAG_VARIABLE:  # the payloads' lengths are the rows', from the reader's table
        packed, expected = raw[start:], payload_bytes
        payload = np.empty((0, width), dtype=np.uint8)
        if lengths is not None:
            if terms.size and int(terms.max()) >= lengths.shape[0]:
                raise DecodeError(f"Frame rejected: term id beyond the {lengths.shape[0]} rows of the table.")
            plen = symbol_lengths(offsets, terms, lengths)
            expected = int(plen.sum())
            if n and int(plen.max()) > width:
                raise DecodeError("Frame rejected: row lengths exceed the record width.")
            if expected == payload_bytes == raw.shape[0] - start:
                payload = _unpacked(packed, plen, width)
    if payload_bytes != expected or raw.shape[0] != start + payload_bytes:
        raise DecodeError(
            f"Frame rejected: payload of {raw.shape[0] - start} bytes, header says {payload_bytes}, "
            f"entries say {expected}."
        )
    payload = payload.reshape(n, width) if packed is None else payload
    empty = np.empty(0, dtype=np.int64)
    return Frame(
        epoch=int(header["epoch"]),
        flags=flags,
        record_bytes=width,
        symbol=symbol,
        a=empty,
        b=empty,
        len_a=None,
        len_b=None,
        payload=payload,
        wire_bytes=int(raw.shape[0]),
        runs=runs,
        offsets=_readonly(offsets),
        terms=_readonly(terms),
        packed=packed,
    )


def _frame_bytes(buf: object) -> np.ndarray:
    """``buf`` as a 1-D ``uint8`` array (no copy), or a TypeError naming the argument."""
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise TypeError("Argument 'buf' must be a 1-D uint8 array or a bytes-like object.")
        return np.ascontiguousarray(buf)  # a strided one copied: the checksum reads it as one buffer
    try:
        return np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"Argument 'buf' must be bytes-like, not {type(buf).__name__}.") from None


def _check_header(
    raw: np.ndarray, *, epoch: int | None, record_bytes: int | None
) -> tuple[Any, int, TermLayout | None]:
    """The checked header of a frame, the offset of its payload, and the layout of its term table
    (None in a frame of pairs)."""
    if raw.shape[0] < FRAME_HEADER_BYTES:
        raise DecodeError(
            f"Frame rejected: {raw.shape[0]} bytes, shorter than the {FRAME_HEADER_BYTES}-byte header."
        )
    header = raw[:FRAME_HEADER_BYTES].copy().view(_HEADER_DTYPE)[0]
    if bytes(header["magic"]) != WIRE_MAGIC:
        raise DecodeError(f"Frame rejected: magic {bytes(header['magic'])!r}, not {WIRE_MAGIC!r}.")
    version, flags = int(header["version"]), int(header["flags"])
    if version not in (PAIRS_VERSION, TERMS_VERSION, VARIABLE_TERMS_VERSION, PACKED_TERMS_VERSION):
        raise DecodeError(
            f"Frame rejected: wire format version {version}; this reader reads versions "
            f"{PAIRS_VERSION} to {PACKED_TERMS_VERSION} only."
        )
    if flags & ~_KNOWN_FLAGS:
        raise DecodeError(f"Frame rejected: unknown flags {flags:#x}.")
    if version not in _versions(flags):
        raise DecodeError(f"Frame rejected: flags {flags:#x} do not belong to a frame of version {version}.")
    n, n_runs, lay = int(header["n_symbols"]), int(header["n_runs"]), None
    if flags & FLAG_TERMS:  # the counts the table states, bounded by the frame's length
        lay = term_layout(raw, version, flags, n, n_runs)
        start = lay.end + (-lay.end % 8)
    else:
        start = _layout(n, flags, n_runs)[1]
    if raw.shape[0] < start:
        raise DecodeError(
            f"Frame rejected: {raw.shape[0]} bytes, shorter than its {start}-byte header and entries."
        )
    crc = zlib.crc32(raw[36:start].data, zlib.crc32(bytes(4), zlib.crc32(raw[:32].data)))  # its field as 0
    if crc != int(header["header_crc"]):
        raise DecodeError(
            f"Frame rejected: header checksum {int(header['header_crc']):#010x}, computed {crc:#010x}."
        )
    if epoch is not None and int(header["epoch"]) != epoch:
        raise DecodeError(f"Frame rejected: epoch {int(header['epoch'])}, expected {epoch}.")
    width = int(header["record_bytes"])
    if width < 1 or (record_bytes is not None and width != record_bytes):
        raise DecodeError(f"Frame rejected: record width {width}, expected {record_bytes}.")
    return header, start, lay


def _receiver_index(table_bytes: np.ndarray, n: int) -> np.ndarray:
    """The receiver index of a frame of ``n`` entries as ``int64`` rows, checked."""
    if table_bytes.shape[0] == 0:
        return _NO_RUNS
    table = table_bytes.view(_RUN_DTYPE)
    runs = np.stack([table["worker"], table["first"], table["count"]], axis=1).astype(np.int64)
    w, first, count = runs[:, 0], runs[:, 1], runs[:, 2]
    after = (w[1:] > w[:-1]) | ((w[1:] == w[:-1]) & (first[1:] >= first[:-1] + count[:-1]))
    if int(count.min()) < 1 or int((first + count).max()) > n or not bool(np.all(after)):
        raise DecodeError(
            "Frame rejected: receiver index not made of non-empty runs of entries, increasing "
            "and disjoint for each worker."
        )
    return _readonly(runs)
