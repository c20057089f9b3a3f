"""A worker's decoding of the exchange's frames (records sent alone), frame by frame as they come.

In the exchange a worker receives from its peers only the records (or pieces) it misses, each
alone in its entry (``b = -1``, :func:`~coded_shuffle.codec.encode_held`): nothing is peeled,
each entry is its record. :class:`HeldDecoder` takes the frames of one delivery in any order and
stores each record into its row of the new batch, and checks it against its checksum, as the
frame is given: a worker that feeds each frame (each round of the exchange) as it arrives has
only the last frame left after the delivery. The result is that of
:func:`~coded_shuffle.codec.decode_worker` given the same frames at once (the first entry of a
record is the one decoded; a record held in the cache, or not needed, is skipped), which
``tests/codec/test_held.py`` checks.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int
from ._common import _Index, _readonly, _ro
from ._out import _output_rows
from .decode import DecodeResult, _addressed, _need_ids, _parsed_frame
from .records import Cache, _checksum_rows
from .solve import keep_rows
from .terms import _move
from .wire import _unpacked

__all__ = ["HeldDecoder"]


class HeldDecoder:
    """A worker's decoding of one delivery of records sent alone, fed frame by frame.

    ``cache``, ``need``, ``worker``, ``epoch``, ``checksums`` and ``out`` are those of
    :func:`~coded_shuffle.codec.decode_worker`; with ``kept``, ``out`` already holds the rows of
    ``need`` that ``cache`` holds (:func:`~coded_shuffle.codec.keep_rows`, called before the
    frames came). :meth:`add` stores and checks the records a frame brings; :meth:`finish`
    returns the :class:`~coded_shuffle.codec.DecodeResult`. A frame's payload is read only
    during its :meth:`add`.

    Examples
    --------
    >>> from coded_shuffle.codec import encode_held, load_dataset
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> dec = HeldDecoder(ds.cache([0]), need=[0, 2, 3], worker=1, checksums=ds.checksums)
    >>> [dec.add(f).tolist() for f in encode_held(ds.cache([2, 3]), [3, 2], epoch=1, max_frame_bytes=2)]
    [[3], [2]]
    >>> res = dec.finish()
    >>> res.cache.data.tolist(), res.decoded.tolist(), res.ok
    ([[0, 1], [4, 5], [6, 7]], [2, 3], True)
    """

    def __init__(
        self,
        cache: Cache,
        *,
        need: object,
        worker: int,
        epoch: int | None = None,
        checksums: np.ndarray | None = None,
        out: np.ndarray | None = None,
        kept: bool = False,
    ) -> None:
        if not isinstance(cache, Cache):
            raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
        if kept and out is None:
            raise ValueError("Argument 'kept' needs 'out', the buffer keep_rows filled.")
        self.worker = check_int(worker, "worker", minimum=0)
        self.cache, self.epoch, self.checksums = cache, epoch, checksums
        self.width = cache.width
        self.variable = cache.lengths is not None
        self.ids = ids = _need_ids(need, checksums)
        self.new = _output_rows(out, ids.size, self.width, cache)
        where = _Index(cache.ids, table=_Index.dense(cache.ids, ids.size))(ids)
        self.held = where >= 0 if kept else keep_rows(cache, ids, self.new)
        self.lengths: np.ndarray | None = None
        if cache.lengths is not None:
            self.lengths = np.zeros(ids.size, dtype=np.int64)
            self.lengths[self.held] = cache.lengths[where[self.held]]
        self._in_need = _Index(ids, table=_Index.dense(ids, ids.size))
        self.done = np.zeros(ids.size, dtype=bool)
        self.sums = np.zeros(ids.size, dtype=np.uint64)
        self.frames = self.steps = 0
        self._result: DecodeResult | None = None

    def add(self, frame: object) -> np.ndarray:
        """Store and check the records ``frame`` (a frame's bytes, or a parsed
        :class:`~coded_shuffle.codec.Frame`) brings; return their ids (those it decoded now).

        Raises :class:`~coded_shuffle.errors.DecodeError` for a frame that does not parse, is not
        of the cache's record layout, or carries an entry of two records, naming it by its place
        in the delivery.
        """
        from ..errors import DecodeError

        if self._result is not None:
            raise ValueError("This HeldDecoder has finished: make a new one for the next delivery.")
        self.frames += 1  # a refused frame keeps its place
        f = _parsed_frame(
            frame, self.frames - 1, worker=self.worker, epoch=self.epoch, width=self.width,
            variable=self.variable, terms=False,
        )  # fmt: skip
        spans = _addressed(f, self.worker)
        entries = (
            np.arange(f.n_symbols, dtype=np.int64) if spans is None
            else np.concatenate([np.arange(x, y, dtype=np.int64) for x, y in spans] + [np.empty(0, np.int64)])
        )  # fmt: skip
        if np.any(f.b[entries] >= 0):
            raise DecodeError(
                f"Worker {self.worker}: frame {self.frames - 1} carries symbols of two records; "
                "decode it with decode_worker."
            )
        pos = self._in_need(f.a[entries])
        fresh = np.flatnonzero(pos >= 0)
        fresh = fresh[~self.held[pos[fresh]] & ~self.done[pos[fresh]]]
        _, first = np.unique(pos[fresh], return_index=True)  # a record twice: its first entry
        fresh = fresh[np.sort(first)]
        dst = pos[fresh]
        if not dst.size:
            return self.ids[:0]
        if f.packed is None:
            payload, src = f.payload, entries[fresh]
        else:  # records of many sizes: only these entries unpacked
            assert f.len_a is not None and f.len_b is not None  # packed only with lengths
            payload = _unpacked(f.packed, np.maximum(f.len_a, f.len_b), self.width, entries[fresh])
            src = np.arange(dst.size, dtype=np.int64)
        _move(self.new, dst, _ro(payload), src)
        lengths = None
        if self.lengths is not None:
            assert f.len_a is not None
            self.lengths[dst] = f.len_a[entries[fresh]]
            lengths = self.lengths[dst]
        self.done[dst] = True
        if self.checksums is not None:
            self.sums[dst] = _checksum_rows(self.new, lengths, dst)
        self.steps += int(dst.size)
        return self.ids[np.sort(dst)]

    def finish(self) -> DecodeResult:
        """The rows no frame brought zeroed (they are ``missing``); the result."""
        if self._result is None:
            ids, new, done = self.ids, self.new, self.done
            lost = ~self.held & ~done
            if lost.any():
                new[lost] = 0
            decoded = ids[done]
            bad = np.empty(0, np.int64)
            if self.checksums is not None and decoded.size:  # each row was checksummed as it came
                bad = decoded[self.sums[done] != np.asarray(self.checksums)[decoded]]
            self._result = DecodeResult(
                worker=self.worker,
                cache=Cache(ids=_readonly(ids), data=new, lengths=self.lengths),
                decoded=_readonly(decoded),
                bad=_readonly(bad),
                missing=_readonly(ids[lost]),
                steps=self.steps,
                rounds=0,
                verified=int(decoded.size) if self.checksums is not None else 0,
            )
        return self._result
