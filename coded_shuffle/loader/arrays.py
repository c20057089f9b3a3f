"""Records of several arrays as one: the rows a loader delivers, of numbers and bools a tensor holds.

Torch-free, so that the packing can be checked (and used) without PyTorch;
:func:`coded_shuffle.torch.pack_arrays` is this function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..codec import open_array
from ._common import open_rows

__all__ = ["pack_arrays"]

# Dtypes torch makes tensors of (numpy kinds: bool, signed, unsigned, float, complex).
_TENSOR_KINDS = "biufc"


def _check_fields(dtype: np.dtype, name: str) -> None:
    fields = [(f, dtype[f]) for f in dtype.names] if dtype.names else [(None, dtype)]
    for f, dt in fields:
        base = dt.base
        if base.kind not in _TENSOR_KINDS or base.names:
            where = "" if f is None else f" (field {f!r})"
            raise ValueError(
                f"Argument '{name}' must hold numbers or bools torch can hold{where}, not {base}."
            )


def pack_arrays(source: object) -> np.ndarray:
    """The records of ``source`` as one array: an array as it is, several arrays as one structured array.

    Parameters
    ----------
    source : numpy.ndarray, str, os.PathLike, sequence or mapping of them
        One array of shape ``(N, ...)`` (or ``.npy`` path, read as a memmap), kept as it is; or
        several, all of ``N`` rows (features and labels in separate files, say): row ``i`` of
        each becomes field ``f0``, ``f1``, ... (or the mapping's keys) of record ``i``, in one
        aligned structured array (a copy in memory).

    Examples
    --------
    >>> import numpy as np
    >>> rec = pack_arrays([np.zeros((4, 3), np.float32), np.arange(4)])
    >>> rec.dtype.names, rec["f0"].shape, rec["f1"].tolist()
    (('f0', 'f1'), (4, 3), [0, 1, 2, 3])
    >>> pack_arrays([np.zeros(4), np.zeros(5)])
    Traceback (most recent call last):
    ...
    ValueError: Argument 'source' must hold arrays of one length N = 4, not 5 rows at 'f1'.
    """
    if isinstance(source, (str, os.PathLike, np.ndarray)):
        arr, _ = open_rows(source)
        _check_fields(arr.dtype, "source")
        return arr
    if isinstance(source, Mapping):
        items = [(str(k), v) for k, v in source.items()]
    elif isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        items = [(f"f{i}", v) for i, v in enumerate(source)]
    else:
        raise TypeError(
            "Argument 'source' must be an array, a .npy path, or a sequence or mapping of them, "
            f"not {type(source).__name__}."
        )
    if not items:
        raise ValueError("Argument 'source' must hold at least one array, not none.")
    arrays = [(k, open_array(v, "source")) for k, v in items]
    N = arrays[0][1].shape[0] if arrays[0][1].ndim else 0
    for k, a in arrays:
        if a.ndim < 1:
            raise ValueError(f"Argument 'source' must hold arrays of at least 1 dimension, not 0 at {k!r}.")
        if a.dtype.names:
            raise ValueError(
                f"Argument 'source' must hold plain arrays when it holds several, not {a.dtype} at {k!r}."
            )
        _check_fields(a.dtype, "source")
        if a.shape[0] != N:
            raise ValueError(
                f"Argument 'source' must hold arrays of one length N = {N}, not {a.shape[0]} rows at {k!r}."
            )
    dtype = np.dtype([(k, a.dtype.newbyteorder("="), a.shape[1:]) for k, a in arrays], align=True)
    out = np.empty(N, dtype=dtype)
    for k, a in arrays:
        out[k] = a
    return out
