"""The shuffle matrix ``S`` of two placements and the leftover matrix ``Omega``.

Notation
--------
=================  ================================================================
``S[i][j]``        ``|A_i^t  intersect  A_j^{t+1}|``: points worker ``i`` holds now and
                   worker ``j`` needs next
``W``              uncoded load: the sum of the off-diagonal entries of ``S``
``Omega``          leftover matrix: off-diagonal ``S`` minus ``min(S_ij, S_ji)``
=================  ================================================================

Reference: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for
Distributed Data Shuffling", Allerton 2016, arXiv:1609.09823, Example 1.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from ._checks import check_int, check_int_array
from ._threads import cores as _cores
from ._threads import run_pieces
from .orders.placement import Placement, check_record_sizes, owner_dtype

__all__ = [
    "shuffle_matrix",
    "shuffle_matrix_from_permutations",
    "feistel_shuffle_matrix",
    "check_shuffle_matrix",
    "elastic_matrix",
    "pair_minima",
    "leftover_matrix",
    "conservation_defect",
    "is_conserved",
    "placements_from_matrix",
    "read_shuffle_matrix",
    "MAX_POINTS",
    "MAX_MATRIX_FILE_BYTES",
]

_CHUNK = 1 << 24


#: Most points a shuffle matrix may count in all: every load and bound is exact up to there (sums
#: in int64; the bounds' float64 products exact below 2**53; the storage bound's pieces, ``C(K - 1, t)``
#: times more, past int64 in two words or Python ints). Larger matrices are refused.
MAX_POINTS = 1 << 53


def check_shuffle_matrix(S: object, name: str = "S", *, square: bool = True) -> np.ndarray:
    """Return ``S`` as a read-only int64 matrix of non-negative entries, or raise.

    With ``square=False`` a ``K_t x K_{t+1}`` matrix is accepted (elastic ``K``).

    Examples
    --------
    >>> check_shuffle_matrix([[2, 1], [1, 2]]).tolist()
    [[2, 1], [1, 2]]
    """
    arr = check_int_array(S, name, ndim=2)
    if square and arr.shape[0] != arr.shape[1]:
        raise ValueError(f"Argument {name!r} must be a square matrix, not of shape {arr.shape}.")
    if min(arr.shape) < 1:
        raise ValueError(f"Argument {name!r} must have at least 1 worker, not 0.")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"Argument {name!r} must have non-negative entries, not {int(arr.min())}.")
    if arr.size and int(arr.max()) > MAX_POINTS // arr.size:  # the total might pass MAX_POINTS
        total = sum(int(v) for v in arr.flat)  # exactly, in Python ints
        if total > MAX_POINTS:
            raise ValueError(
                f"Argument {name!r} must count at most 2**53 = {MAX_POINTS} points in all (the loads and "
                f"bounds are exact integers up to there), not {total}."
            )
    out = np.array(arr, dtype=np.int64)
    out.flags.writeable = False
    return out


def elastic_matrix(S: object) -> np.ndarray:
    """Return the ``K x K`` matrix, ``K = max(K_t, K_{t+1})``, of a ``K_t x K_{t+1}`` matrix ``S``.

    When the number of workers changes between epochs, worker ``k`` keeps its index. A worker
    that joins (``k >= K_t``) starts with an empty cache: its row is zero, it holds nothing to
    code with. A worker that leaves (``k >= K_{t+1}``) needs nothing: its column is zero, and since
    its cache is gone it can decode nothing, so its points can be neither paired nor carried by a
    cycle (it has no incoming edge): the planner sends them uncoded, and the lower bound counts
    them in full (the leaving worker is last in every best ordering). No special case is needed
    downstream: every planner and bound takes the square matrix.

    Examples
    --------
    Two workers become three; the new worker 2 needs one point from each:

    >>> elastic_matrix([[2, 0, 1], [0, 2, 1]]).tolist()
    [[2, 0, 1], [0, 2, 1], [0, 0, 0]]
    """
    S = check_shuffle_matrix(S, square=False)
    K = max(S.shape)
    out = np.zeros((K, K), dtype=np.int64)
    out[: S.shape[0], : S.shape[1]] = S
    out.flags.writeable = False
    return out


def shuffle_matrix(placement_t: Placement, placement_t1: Placement, *, sizes: object = None) -> np.ndarray:
    """Return ``S[i][j] = |A_i^t  intersect  A_j^{t+1}|`` for two placements of the same points.

    With ``sizes`` (the bytes of each point) the matrix is in bytes: ``S[i][j]`` is the sum of
    the sizes of the points held by ``i`` and needed by ``j``. It is a shuffle matrix like the
    other (every load and bound takes it, in bytes): the points become their bytes, each byte a
    point of its own, and the genie bound of it is the bound weighted by size
    (``proofs/claim_14_byte_bound.py``).

    Computed by one ``np.bincount`` over the key ``i * K + j``, in chunks of 2^24 points so that
    memory stays bounded; no Python loop over points, no ``N x K`` structure.

    Parameters
    ----------
    placement_t, placement_t1 : Placement
        Placements of epochs ``t`` and ``t + 1`` of the same ``N`` points.
    sizes : array_like of int, optional
        Bytes of each of the ``N`` points, each at least 1, at most 2^53 in all
        (:func:`coded_shuffle.orders.check_record_sizes`).

    Returns
    -------
    numpy.ndarray
        Read-only int64 matrix of shape ``(K_t, K_{t+1})``: points, or bytes with ``sizes``.

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> a = placement_from_owner([0, 0, 1, 1], 2)
    >>> b = placement_from_owner([0, 1, 0, 1], 2)
    >>> shuffle_matrix(a, b).tolist()
    [[1, 1], [1, 1]]
    >>> shuffle_matrix(a, b, sizes=[10, 20, 30, 40]).tolist()
    [[10, 20], [30, 40]]
    """
    for name, p in (("placement_t", placement_t), ("placement_t1", placement_t1)):
        if not isinstance(p, Placement):
            raise TypeError(f"Argument {name!r} must be a Placement, not {type(p).__name__}.")
    if placement_t.N != placement_t1.N:
        raise ValueError(
            f"Argument 'placement_t1' must place the same N = {placement_t.N} points, not {placement_t1.N}."
        )
    K_t, K_t1 = placement_t.K, placement_t1.K
    w = None if sizes is None else check_record_sizes(sizes, placement_t.N)
    counts = np.zeros(K_t * K_t1, dtype=np.int64)
    a, b = placement_t.owner, placement_t1.owner
    for lo in range(0, placement_t.N, _CHUNK):
        key = a[lo : lo + _CHUNK].astype(np.int64)
        key *= K_t1
        key += b[lo : lo + _CHUNK]
        if w is None:
            counts += np.bincount(key, minlength=K_t * K_t1)
        else:  # float64 sums of integers stay exact: the sizes add up to at most 2**53
            counts += np.bincount(key, weights=w[lo : lo + _CHUNK], minlength=K_t * K_t1).astype(np.int64)
    S = counts.reshape(K_t, K_t1)
    S.flags.writeable = False
    return S


def shuffle_matrix_from_permutations(perm_t: object, perm_t1: object, K: int) -> np.ndarray:
    """Return ``S`` for two permutations each cut into ``K`` batches.

    Examples
    --------
    >>> shuffle_matrix_from_permutations([0, 1, 2, 3], [2, 3, 0, 1], 2).tolist()
    [[0, 2], [2, 0]]
    """
    from .orders.placement import placement_from_permutation

    return shuffle_matrix(placement_from_permutation(perm_t, K), placement_from_permutation(perm_t1, K))


#: Walks of at least this many positions run on two threads (with two cores).
_TWO_THREADS_FROM = 1 << 20


def _on_two_cores(
    work: Callable[[int, int, int], None],
    N: int,
    piece: int,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Run ``work(slot, lo, hi)`` over the pieces ``[lo, hi)`` of ``piece`` positions of ``[0, N)``.

    With two cores and at least ``_TWO_THREADS_FROM`` positions, two threads (slots 0 and 1,
    slot 0 the caller's) take the pieces in turn, so a thread the scheduler holds back leaves its
    share to the other; ``work`` must release the GIL and keep what it makes per slot. Otherwise
    slot 0 takes them all, in order. ``progress``, if given, is called after each piece (from
    either thread, one call at a time) with the number of positions done so far, ``N`` last. An
    exception in either thread stops both at their next piece and is raised here.
    """
    cuts = [(lo, min(lo + piece, N)) for lo in range(0, N, piece)]
    if N < _TWO_THREADS_FROM or _cores() < 2:
        run_pieces(work, cuts, threads=False, progress=progress)
        return
    run_pieces(work, cuts, threads=True, progress=progress)


def feistel_shuffle_matrix(
    N: int,
    K_t: int,
    K_t1: int,
    *,
    seed: int,
    epoch: int,
    chunk: int = 1 << 22,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Return ``S`` between epochs ``epoch`` and ``epoch + 1`` of the ``feistel`` order, streamed.

    Position ``p`` of batch ``owner_t(p)`` holds point ``n = pi_t(p)``, which epoch ``t + 1``
    places at ``pi_{t+1}^{-1}(n)``; the cell ``(owner_t(p), owner_{t+1}(pi_{t+1}^{-1}(n)))`` gains
    one. A compiled kernel (:func:`coded_shuffle.orders._feistel_kernels.count_transitions`) does it for a
    chunk of positions at a time, with no array of points or owners, on two threads when there are
    two cores (each with its own counts, summed at the end). Memory is ``O(K_t K_{t+1})`` whatever
    ``N``, so ``N = 10^9`` fits in a small machine. ``progress``, if given, is called after each
    chunk with the number of positions walked so far (``N`` at the end; with two threads, the
    chunks finish in any order but the count only grows).

    The reference it equals, in numpy, over the chunks ``pos = np.arange(lo, lo + chunk)``::

        key = positions_to_owners(pos, N, K_t).astype(np.int64) * K_t1
        key += positions_to_owners(pi_t1.inverse(pi_t.forward(pos)), N, K_t1)
        counts += np.bincount(key, minlength=K_t * K_t1)

    Parameters
    ----------
    N : int
        Points, ``max(K_t, K_t1) <= N <= 2^53``.
    K_t, K_t1 : int
        Workers of epochs ``epoch`` and ``epoch + 1``.
    seed, epoch : int
        The two permutations are ``feistel_permutation(N, seed=seed, epoch=epoch)`` and of
        ``epoch + 1``.
    chunk : int
        Positions per kernel call, the unit of work a thread takes and of ``progress``.
    progress : callable, optional
        Called with the positions walked so far.

    Examples
    --------
    >>> from coded_shuffle.orders import OrderSpec, order_placement
    >>> spec = OrderSpec("feistel")
    >>> a = order_placement(50, 3, seed=2, epoch=4, spec=spec)
    >>> b = order_placement(50, 4, seed=2, epoch=5, spec=spec)
    >>> walked = []
    >>> S = feistel_shuffle_matrix(50, 3, 4, seed=2, epoch=4, chunk=20, progress=walked.append)
    >>> bool((S == shuffle_matrix(a, b)).all()), walked
    (True, [20, 40, 50])
    """
    from .orders._feistel_kernels import count_transitions
    from .orders.feistel import feistel_permutation

    N = check_int(N, "N", minimum=1)
    K_t = check_int(K_t, "K_t", minimum=1)
    K_t1 = check_int(K_t1, "K_t1", minimum=1)
    chunk = check_int(chunk, "chunk", minimum=1)
    if N < max(K_t, K_t1):
        raise ValueError(f"Argument 'N' must be at least K = {max(K_t, K_t1)}, not {N}.")
    if N > MAX_POINTS:
        raise ValueError(f"Argument 'N' must be at most 2**53 = {MAX_POINTS}, not {N}.")
    pi_t = feistel_permutation(N, seed=seed, epoch=epoch)
    pi_t1 = feistel_permutation(N, seed=seed, epoch=epoch + 1)
    keys_t = np.array(pi_t.keys, dtype=np.uint64)
    keys_t1 = np.array(pi_t1.keys, dtype=np.uint64)
    counts = [np.zeros(K_t * K_t1, dtype=np.int64)]

    def work(slot: int, lo: int, hi: int) -> None:
        if slot == len(counts):  # the second thread's own counts, made by it on its first piece
            counts.append(np.zeros(K_t * K_t1, dtype=np.int64))
        count_transitions(lo, hi, keys_t, keys_t1, pi_t.bits, N, K_t, K_t1, counts[slot])

    _on_two_cores(work, N, chunk, progress)
    total = counts[0]
    for more in counts[1:]:
        total += more
    S = total.reshape(K_t, K_t1)
    S.flags.writeable = False
    return S


def pair_minima(S: object) -> np.ndarray:
    """Return the symmetric matrix ``min(S_ij, S_ji)`` with a zero diagonal.

    Its upper triangle counts the order-2 symbols sent for each pair ``{i, j}``.

    Examples
    --------
    >>> pair_minima([[2, 1, 2], [2, 1, 2], [1, 3, 1]]).tolist()
    [[0, 1, 1], [1, 0, 2], [1, 2, 0]]
    """
    S = check_shuffle_matrix(S)
    m = np.minimum(S, S.T)
    np.fill_diagonal(m, 0)
    return m


def leftover_matrix(S: object) -> np.ndarray:
    """Return the leftover matrix ``Omega``: off-diagonal ``S`` minus the pairwise minima.

    Examples
    --------
    Example 1 of the paper (K = 3, N = 15) leaves one 3-cycle:

    >>> leftover_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]]).tolist()
    [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    """
    S = check_shuffle_matrix(S)
    omega = S - np.minimum(S, S.T)
    np.fill_diagonal(omega, 0)
    omega.flags.writeable = False
    return omega


def conservation_defect(S: object) -> np.ndarray:
    """Return, per worker, outgoing minus incoming leftovers (row minus column sums of ``Omega``).

    All zeros exactly when ``S`` has equal row and column sums worker by worker, which holds for
    equal batch sizes (leftover conservation).

    Examples
    --------
    >>> conservation_defect([[0, 2], [1, 0]]).tolist()
    [1, -1]
    """
    omega = leftover_matrix(S)
    return omega.sum(axis=1) - omega.sum(axis=0)


def is_conserved(S: object) -> bool:
    """Return whether every worker's outgoing leftovers equal its incoming leftovers.

    Examples
    --------
    >>> is_conserved([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    True
    """
    return not bool(np.any(conservation_defect(S)))


def placements_from_matrix(S: object) -> tuple[Placement, Placement]:
    """Return two placements whose shuffle matrix is ``S``.

    The points are numbered cell by cell in row-major order: the first ``S[0][0]`` points are
    held by worker 0 and needed by worker 0, the next ``S[0][1]`` held by 0 and needed by 1, ...

    Examples
    --------
    >>> a, b = placements_from_matrix([[1, 2], [0, 1]])
    >>> a.owner.tolist(), b.owner.tolist()
    ([0, 0, 0, 1], [0, 1, 1, 1])
    """
    S = check_shuffle_matrix(S)
    K = S.shape[0]
    counts = S.ravel()
    dtype = owner_dtype(K)
    cells = np.arange(K * K, dtype=np.int64)
    owner_t = np.repeat((cells // K).astype(dtype), counts)
    owner_t1 = np.repeat((cells % K).astype(dtype), counts)
    owner_t.flags.writeable = False
    owner_t1.flags.writeable = False
    return Placement(K=K, owner=owner_t), Placement(K=K, owner=owner_t1)


#: Largest matrix file :func:`read_shuffle_matrix` reads (64 MiB: a ``K`` of several thousand);
#: a larger one is refused after reading one byte more, so that an endless input is not held.
MAX_MATRIX_FILE_BYTES = 64 << 20


def read_shuffle_matrix(source: str | os.PathLike[str] | IO[Any]) -> np.ndarray:
    """Read a shuffle matrix from a JSON or CSV file, checked as :func:`check_shuffle_matrix`.

    JSON: a list of ``K_t`` lists of ``K_{t+1}`` non-negative ints, ``S[i][j]`` the points held by
    worker ``i`` and needed by worker ``j``; ``K_t x K_{t+1}`` when the number of workers changes,
    as every load and bound takes it (:func:`elastic_matrix`). CSV: ``K_t`` lines of ``K_{t+1}``
    such ints, separated by commas, semicolons (when any line has one) or blanks, optionally
    under one header line of labels (no cell of it an integer). The format is taken from the
    content: JSON if it starts with ``[`` or ``{``. A UTF-8 byte order mark is skipped.

    Parameters
    ----------
    source : str, path-like or file object
        The file's path, or a file open for reading (bytes or text; standard input, say).

    Returns
    -------
    numpy.ndarray
        Read-only int64 matrix of shape ``(K_t, K_{t+1})``.

    Raises
    ------
    ValueError
        Anything but such a matrix (of at most :data:`MAX_MATRIX_FILE_BYTES` bytes, with at most
        :data:`MAX_POINTS` points in all), with one line naming the file, line and column at fault.
    OSError
        The file cannot be read.

    Examples
    --------
    >>> import io
    >>> read_shuffle_matrix(io.StringIO("[[2, 1, 2], [2, 1, 2], [1, 3, 1]]")).tolist()
    [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
    >>> read_shuffle_matrix(io.StringIO("w0,w1,w2\\n2,0,1\\n0,2,1\\n")).shape  # K: 2 -> 3
    (2, 3)
    """
    if isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        with open(name, "rb") as fh:
            data: bytes | str = fh.read(MAX_MATRIX_FILE_BYTES + 1)
    elif hasattr(source, "read"):
        name = str(getattr(source, "name", "<file>"))
        raw = getattr(source, "buffer", None)  # a text stream's bytes, so that UTF-8 is checked
        data = (raw if raw is not None else source).read(MAX_MATRIX_FILE_BYTES + 1)
    else:
        raise TypeError(f"Argument 'source' must be a path or a file object, not {type(source).__name__}.")
    if len(data) > MAX_MATRIX_FILE_BYTES:
        raise ValueError(f"matrix file {name!r} is larger than {MAX_MATRIX_FILE_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise ValueError(f"matrix file {name!r} is not UTF-8 text") from None
    text = text.removeprefix("\ufeff")
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"matrix file {name!r} is empty")
    if stripped[0] in "[{":
        return _json_matrix(stripped, name)
    try:
        scalar = json.loads(stripped)
    except ValueError:
        return _csv_matrix(text, name)
    raise ValueError(
        f"matrix file {name!r} must hold a JSON list of lists (or CSV rows), not the JSON "
        f"{type(scalar).__name__} {stripped[:20]!r}; a 1 x 1 matrix is [[{stripped[:20]}]]"
    )


def _json_matrix(text: str, name: str) -> np.ndarray:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"matrix file {name!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ValueError(f"matrix file {name!r} must hold a JSON list of lists")
    width = len(rows[0]) if rows else 0
    for i, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"matrix in {name!r} is not rectangular: row {i + 1} has {len(row)} entries, expected {width}"
            )
    values = [[_json_entry(v, f"matrix in {name!r}, row {i + 1}, column {j + 1}") for j, v in enumerate(row)]
              for i, row in enumerate(rows)]  # fmt: skip
    return _checked(values, name)


def _csv_matrix(text: str, name: str) -> np.ndarray:
    """Read CSV: the separator is ``;`` if any line has one, else ``,`` if any has one, else blanks.

    A separator ending a line (as some spreadsheets write) ends it; it adds no empty entry.
    """
    sep = ";" if ";" in text else "," if "," in text else None
    lines: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in next(csv.reader([line], delimiter=sep))] if sep else line.split()
        if len(cells) > 1 and not cells[-1]:
            cells.pop()
        lines.append((number, cells))
    first = lines[0][1]
    if len(lines) > 1 and not any(_is_int(c) for c in first):
        lines = lines[1:]  # a header of labels
    width = len(lines[0][1])
    for number, cells in lines:
        if len(cells) != width:
            raise ValueError(
                f"matrix in {name!r} is not rectangular: line {number} has {len(cells)} entries, "
                f"expected {width}"
            )
    values = [[_entry(c, f"matrix in {name!r}, line {number}, column {j + 1}") for j, c in enumerate(cells)]
              for number, cells in lines]  # fmt: skip
    return _checked(values, name)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _checked(values: list[list[int]], name: str) -> np.ndarray:
    try:
        return check_shuffle_matrix(values, square=False)
    except ValueError as exc:
        raise ValueError(f"matrix in {name!r}: {exc}") from None


def _json_entry(v: Any, where: str) -> int:
    """A JSON entry: a JSON integer only (no string, float or boolean)."""
    if isinstance(v, bool) or not isinstance(v, int):
        kind = {str: "a string", float: "a float", bool: "a boolean"}.get(type(v), "not a number")
        raise ValueError(f"{where}: {v!r} is {kind}, not an integer")
    return _entry(v, where)


def _entry(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise ValueError(f"{where}: {v!r} is not an integer")
    if isinstance(v, int):
        out = v
    elif isinstance(v, float) and v.is_integer():
        out = int(v)
    elif isinstance(v, str):
        if not v:
            raise ValueError(f"{where}: the entry is empty")
        try:
            out = int(v)
        except ValueError:
            raise ValueError(f"{where}: {v!r} is not an integer") from None
    else:
        raise ValueError(f"{where}: {v!r} is not an integer")
    if out < 0:
        raise ValueError(f"{where}: {out} is negative")
    if out > MAX_POINTS:
        raise ValueError(f"{where}: {out} is too large: more than 2**53 = {MAX_POINTS} points")
    return out
