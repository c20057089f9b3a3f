"""Records of several arrays as one: the rows a loader delivers, of numbers and bools a tensor holds.

Torch-free, so that the packing can be checked (and used) without PyTorch;
:func:`coded_shuffle.torch.pack_arrays` is this function.
"""

from __future__ import annotations

import numpy as np

from ..records import NpyRecords, RecordSource, open_records

__all__ = ["pack_arrays", "tensor_records"]

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


def tensor_records(source: object) -> RecordSource:
    """``source`` as a record source whose every field torch can hold, or raise naming ``source``.

    Examples
    --------
    >>> import numpy as np
    >>> tensor_records([np.zeros((4, 3), np.float32), np.arange(4)]).dtype.names
    ('f0', 'f1')
    """
    records = open_records(source)
    if isinstance(records, NpyRecords):
        _check_fields(records.dtype, "source")
    return records


def pack_arrays(source: object) -> np.ndarray:
    """The records of ``source`` as one array: an array as it is, several arrays as one structured array.

    Parameters
    ----------
    source : numpy.ndarray, str, os.PathLike, sequence or mapping of them
        One array of shape ``(N, ...)`` (or ``.npy`` path, read as a memmap), kept as it is; or
        several, all of ``N`` rows (features and labels in separate files, say): row ``i`` of
        each becomes field ``f0``, ``f1``, ... (or the mapping's keys) of record ``i``, in one
        aligned structured array (a copy in memory), as :class:`~coded_shuffle.records.NpyRecords`
        joins them.

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
    records = tensor_records(source)
    if not isinstance(records, NpyRecords):
        raise TypeError(
            "Argument 'source' must be an array, a .npy path, or a sequence or mapping of them, "
            f"not {type(source).__name__}."
        )
    if records.names is None:
        return records.arrays[0]
    N = len(records)
    return records.gather(np.arange(N)).view(records.dtype).reshape(N)
