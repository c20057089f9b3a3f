"""Bytes of a transition: records, checksums, XOR symbols, the wire format, and worker decoding.

Notation
--------
=============  ==========================================================================
``N``          number of records (data points), numbered ``0..N-1``
``B``          record width in bytes (fixed-size records), or the longest length (variable)
symbol ``s``   ``x[a_s] XOR x[b_s]`` (two points) or ``x[a_s]`` alone (``b_s = -1``), numbered
               as in :meth:`coded_shuffle.plan.DeliveryPlan.transmissions`
cache          the records a worker holds: its batch ``A_k^t`` of epoch ``t``
frame          one batch of symbols on the wire: header, one entry per symbol, payload
=============  ==========================================================================

Records
-------
A :class:`Dataset` holds ``N`` records as a read-only ``(N, B)`` ``uint8`` view: the table of a
record source (:mod:`coded_shuffle.records`; an array of shape ``(N, ...)`` viewed as bytes, no
copy when it is C-contiguous, so a ``.npy`` file's memory map stays on disk), or variable-length
byte strings stored zero-padded to the longest length ``B`` with their lengths beside. Two
records of different lengths are XORed over the longer length (the shorter one padded with
zeros); the symbol carries both lengths, so the worker that knows one record recovers the other
and cuts it to its length.

Checksums
---------
Each record gets a 64-bit checksum when the dataset is loaded (:func:`record_checksums`). The
record's bytes, zero-padded to a multiple of 8, are read as little-endian ``uint64`` words
``w_0 .. w_{m-1}``, and with ``L`` its length in bytes::

    h = fmix64( L * 0x9E3779B97F4A7C15  +  sum_i fmix64(w_i XOR k_i) )   (mod 2^64)

where ``fmix64`` is the MurmurHash3 finalizer and ``k_i = splitmix64(i)`` a fixed key per word
position. Every ``fmix64(w XOR k)`` is a bijection of ``w``, so any corruption confined to one
word always changes ``h``; wider corruption goes unnoticed with probability about ``2^-64``.
It is not a cryptographic hash. It is computed by a compiled loop over the rows (no
temporary), and the pure-Python :func:`checksum_reference` states it plainly.

Hot path
--------
The bytes are moved by compiled loops (numba, :mod:`coded_shuffle._codec_kernels`, compiled on
first use and cached on disk): encoding XORs the two rows of each symbol straight into the wire
buffer; decoding takes the symbols addressed to the worker (the frame's receiver index), peels
them in one compiled pass (the chains of leftover cycles through linked lists), lists one row
operation per record of the new batch in row order (and one per transit point of a chain), then
does them round by round straight into the new cache (records of many sizes: each payload read
where it was received, each row XORed only up to its length, zeroed past it and checksummed in
the same pass). Large jobs run as two
halves on two threads. The results are byte for byte those of the plain numpy expressions each
kernel states, which the tests use as their oracle.

Layout
------
:mod:`.records` (datasets and checksums), :mod:`.wire` (the frame format and its parser),
:mod:`.table` (the term table of a frame of many-term symbols, packed at the fewest bits),
:mod:`.encode` (symbols and frames), :mod:`.decode` (a worker's decoding), :mod:`.terms`
(symbols of many terms, for excess storage: their frames and their solving by elimination),
:mod:`.held` (the exchange's records sent alone, decoded frame by frame as they come);
``_common`` holds the aligned buffers, read-only views and the second thread they share.
"""

from __future__ import annotations

from .decode import DecodeResult, decode_worker
from .encode import encode_held, encode_plan, encode_plan_arrays, encode_symbols
from .held import HeldDecoder
from .records import (
    Cache,
    Dataset,
    checksum_reference,
    load_dataset,
    record_checksums,
)
from .solve import TermsDecoder, decode_terms, keep_rows
from .terms import encode_terms, term_blocks
from .wire import (
    DEFAULT_MAX_FRAME_BYTES,
    EVERY_WORKER,
    FLAG_REPAIR,
    FLAG_TERMS,
    FLAG_VARIABLE,
    FLAG_WIDE_IDS,
    FRAME_HEADER_BYTES,
    PACKED_TERMS_VERSION,
    PAIRS_VERSION,
    RUN_BYTES,
    TERMS_VERSION,
    VARIABLE_TERMS_VERSION,
    WIRE_MAGIC,
    WIRE_VERSION,
    Frame,
    FrameSizes,
    entry_bytes,
    frame_flags,
    frame_overhead,
    frame_scopes,
    frame_sizes,
    frame_version,
    parse_frame,
    symbol_lengths,
)

__all__ = [
    "frame_scopes",
    "EVERY_WORKER",
    "WIRE_MAGIC",
    "WIRE_VERSION",
    "PAIRS_VERSION",
    "TERMS_VERSION",
    "VARIABLE_TERMS_VERSION",
    "PACKED_TERMS_VERSION",
    "symbol_lengths",
    "frame_version",
    "FLAG_TERMS",
    "FRAME_HEADER_BYTES",
    "FLAG_VARIABLE",
    "FLAG_WIDE_IDS",
    "FLAG_REPAIR",
    "RUN_BYTES",
    "entry_bytes",
    "DEFAULT_MAX_FRAME_BYTES",
    "Dataset",
    "Cache",
    "Frame",
    "DecodeResult",
    "load_dataset",
    "record_checksums",
    "checksum_reference",
    "encode_symbols",
    "encode_plan",
    "encode_plan_arrays",
    "encode_held",
    "parse_frame",
    "frame_sizes",
    "frame_flags",
    "FrameSizes",
    "frame_overhead",
    "decode_worker",
    "encode_terms",
    "decode_terms",
    "TermsDecoder",
    "HeldDecoder",
    "keep_rows",
    "term_blocks",
]
