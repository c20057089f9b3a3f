"""The buffer a worker decodes its new batch into: given by the caller (a recycled cache's) and
checked, or made here; rows of the width, or records of many sizes packed (:class:`.Cache`)."""

from __future__ import annotations

import numpy as np

from .._checks import check_int_array
from ._common import _EMPTY_I64, _aligned_empty, _aligned_rows, _aligned_zeros, _i64
from .records import Cache


def _output_rows(out: np.ndarray | None, n_out: int, width: int, cache: Cache) -> np.ndarray:
    """``out`` checked as the buffer of the new records, or a new aligned one."""
    if out is None:
        return _aligned_rows(n_out, width)
    if not _writable_apart(out, cache) or out.shape != (n_out, width):
        raise ValueError(
            f"Argument 'out' must be a writeable C-contiguous uint8 array of shape {(n_out, width)} "
            "that does not overlap the cache."
        )
    return out


def _zeroed_rows(
    out: np.ndarray | None, n_out: int, width: int, cache: Cache, out_lengths: object
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_output_rows`, with the length past which each row is zero (:func:`_apply`'s
    ``zeroed``; empty when unknown, or for records of one size, whose rows are written whole):
    ``out_lengths``, or none for a new buffer of records of many sizes, made zero."""
    if out is None:
        if out_lengths is not None:
            raise ValueError("Argument 'out_lengths' needs the buffer 'out' whose rows it describes.")
        if cache.lengths is None:
            return _aligned_rows(n_out, width), _EMPTY_I64
        return _aligned_zeros(n_out * width).reshape(n_out, width), _i64(np.zeros(n_out, np.int64))
    out = _output_rows(out, n_out, width, cache)
    if out_lengths is None or cache.lengths is None:
        return out, _EMPTY_I64
    zeroed = check_int_array(out_lengths, "out_lengths", ndim=1)
    if zeroed.shape[0] != n_out or (n_out and (zeroed.min() < 0 or zeroed.max() > width)):
        raise ValueError(
            f"Argument 'out_lengths' must give a length in [0, {width}] for each of the {n_out} rows "
            "of 'out'."
        )
    return out, _i64(zeroed)


def _packed_out(out: np.ndarray | None, total: int, cache: Cache, out_lengths: object) -> np.ndarray:
    """The buffer of the new records of a packed cache, ``total`` bytes end to end: ``out``
    checked, or a new aligned one."""
    if out_lengths is not None:
        raise ValueError("Argument 'out_lengths' describes rows: a packed cache's new records have none.")
    if out is None:
        return _aligned_empty(max(total, 1))
    if not _writable_apart(out, cache) or out.ndim != 1 or out.shape[0] < total:
        raise ValueError(
            f"Argument 'out' must be a writeable C-contiguous 1-D uint8 array of at least {total} bytes "
            "(the new records, packed) that does not overlap the cache."
        )
    return out


def _writable_apart(out: object, cache: Cache) -> bool:
    """Whether ``out`` is a writeable C-contiguous ``uint8`` array apart from the cache's buffer."""
    return (
        isinstance(out, np.ndarray)
        and out.dtype == np.uint8
        and out.flags.c_contiguous
        and out.flags.writeable
        and not np.shares_memory(out, cache.buffer)
    )
