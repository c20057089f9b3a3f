"""The re-cut of a storage of ``M > 1`` batches across processes: a job whose workers' files hold
the storage of ``K`` workers, relaunched on ``K'`` (the survivors of a lost host, or more hosts).

Notation
--------
=============  =============================================================================
``K``, ``K'``  workers of the job that wrote the files, and of the job relaunched
``M = 1 + t``  batches each worker stores, the same in both
``P``, ``P'``  pieces a record at ``K`` and at ``K'`` (:func:`~.state.storage_pieces`)
=============  =============================================================================

A cache file's header (:func:`~.cache_dir.cache_header`) says the worker that wrote it and the
units it holds: ``N P`` pieces of ``ceil(B / P)`` bytes, from which the job's ``N``, ``B`` and
``M`` give ``K`` (:func:`stored_workers`); a file of another seed, of records of another number
or size, or of another ``M`` that gives no ``K`` is not used (a line says so). The relaunched job
runs the plan of the in-process re-cut (:func:`~.recut.recut_plan`, :func:`~.recut.recut_storage`)
over its link, in rounds bounded as start-up steps:

1. *files* (:func:`files_round`): each worker posts the files it sees in its folder (whole
   headers of this job); the master chooses the ``K`` of the lowest-numbered file, gives each
   file of that ``K``, in increasing number, to the lowest-numbered worker of the ``K'`` that sees
   it and has none yet (in a folder every worker sees, worker ``j`` reads the ``j``-th file, as
   :func:`~.recover.recut_restart`; on hosts that see their own file only, each reads its own),
   and shares that choice. Each worker posts too whether its own file :func:`fits` the storage
   a restore at ``K'`` plans from (holds none of its pieces but that storage's). No file, or
   ``P = P'`` with every file fitting and none numbered ``K'`` or more (a restart at the same
   ``K``), is not a re-cut: the storage
   is restored (:mod:`.restore`), and the transitions after it are those of a job that never
   stopped. ``P = P'`` with a file that does not fit (records stored whole at both ``K``, whose
   header cannot tell ``K``; or files of the storage a re-cut left, at ``K'``) is a re-cut.
2. *checksums*: the master shares the checksums of the pieces at ``K`` and at ``K'``; each
   worker reads its file against the first (:func:`~.cache_dir.load_cache`: a piece that fails
   is absent, a file of another dataset or cut short is absent, in a line) and posts the pieces
   it holds.
3. *segments*: every rank makes the same plan from the posts; the master sends each worker the
   segments no worker holds, each once (to the first worker that stores it); the workers send
   each other the rest, peer to peer (the master takes no part): a segment of an old piece the
   sender holds, or one it had from the master. Each worker checks every new piece against the
   checksums at ``K'`` and posts its verdict (the master's :attr:`~.recut.RecutReport.verified`).

The storage the job goes on from is the plan's (:attr:`~.recut.RecutReport.held`: that of
``PieceStorage(K', M).start`` of the first epoch's batches, its labels assigned so that the
workers keep the most bytes), the same on every rank; no transition follows: the first epoch's
batches are within it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codec import Cache, Dataset, record_checksums
from ..errors import IntegrityError
from ..orders import Placement
from ..transport import ControlLink
from .cache_dir import CacheFileError, cache_header, cache_ids, cache_path, load_cache
from .mpi import Watchdog, posts_round, setup_step
from .recut import (
    RecutPlan,
    RecutReport,
    _copy_spans,
    _report,
    _segments_of,
    _storage,
    _storage_of,
    recut_plan,
)
from .recut_labels import LABELS
from .rest import table_dataset
from .state import unit_lengths

if TYPE_CHECKING:
    from .schedule import Epoch
    from .schemes import Scheme
    from .session import Session

__all__ = [
    "stored_workers",
    "seen_files",
    "fits",
    "choose_files",
    "files_round",
    "serve_recut",
    "receive_recut",
]

#: The most workers a storage is cut for (holder sets of 64 bits).
_MOST = 64


def stored_workers(
    units: int, width: int, *, N: int, B: int, M: int, sizes: np.ndarray | None = None
) -> int | None:
    """The ``K`` of a storage of ``M`` batches of ``N`` records of ``B`` bytes (``sizes``: of many
    sizes, ``B`` the widest) cut into ``units`` pieces of ``width`` bytes (a cache file's header),
    or None when no ``K`` cuts them so.

    Examples
    --------
    >>> stored_workers(24 * 3, 2731, N=24, B=8192, M=2), stored_workers(24 * 4, 2048, N=24, B=8192, M=3)
    (4, None)
    """
    if N < 1 or units % N:
        return None
    for K in range(max(M, 2), _MOST + 1):
        at = _storage_of(B, sizes, K, M)
        if at.pieces * N == units and at.piece_bytes(B) == width:
            return K
    return None


def seen_files(
    folder: str | os.PathLike[str], *, N: int, B: int, M: int, seed: int, worker: int,
    sizes: np.ndarray | None = None,
) -> tuple[list[tuple[int, int]], list[str]]:  # fmt: skip
    """``(file, K)`` of every cache file in ``folder`` whose header is whole and of this job (its
    seed, a storage of ``M`` batches of these ``N`` records of ``B`` bytes), by file number; and a
    line for the file of ``worker``'s own number when it is not used, saying why."""
    out, notes = [], []
    for path in sorted(Path(folder).glob("worker-*.cache")):
        try:
            f = int(path.stem.removeprefix("worker-"))
        except ValueError:
            continue
        why = None
        try:
            h = cache_header(path)
        except (CacheFileError, OSError) as exc:
            why = f"{exc}"
        else:
            K = stored_workers(h.N, h.record_bytes, N=N, B=B, M=M, sizes=sizes)
            if h.seed != seed:
                why = f"Cache file {path}: seed {'none' if h.seed is None else h.seed}, not {seed}."
            elif h.worker != f:
                why = f"Cache file {path}: written by worker {h.worker}, not {f}."
            elif K is None:
                why = (
                    f"Cache file {path}: {h.N} pieces of {h.record_bytes} bytes, not a storage of "
                    f"M = {M} batches of N = {N} records of {B} bytes at any K."
                )
            else:
                out.append((f, K))
        if why is not None and f == worker:
            notes.append(f"{why} Treated as absent.")
    out.sort()
    return out, notes


def fits(folder: str | os.PathLike[str], worker: int, expected: np.ndarray) -> bool:
    """Whether ``worker``'s own file in ``folder`` holds only pieces of ``expected`` (its storage
    under the job's placement, which a restore at the same ``K`` plans from): true too when it has
    no file whose tables are whole (a restore treats it as absent anyway)."""
    try:
        ids = cache_ids(cache_path(folder, worker))
    except (CacheFileError, OSError):
        return True
    return bool(np.isin(ids, expected).all())


def choose_files(posts: Sequence[Sequence[tuple[int, int]]], K_next: int) -> tuple[int, list[int]] | None:
    """The ``K`` of the lowest-numbered file posted, and the file each worker of the ``K_next``
    reads (``-1``: none): each file of that ``K``, in increasing number, to the lowest-numbered
    worker that sees it and has none yet. None when no file is posted.

    Examples
    --------
    A folder every worker sees, worker 2's file of four gone, three workers relaunched:

    >>> seen = [(0, 4), (1, 4), (3, 4)]
    >>> choose_files([seen, seen, seen], 3), choose_files([[(1, 4)], [], [(0, 4)]], 3)
    ((4, [0, 1, 3]), (4, [1, -1, 0]))
    """
    every = sorted({tuple(p) for post in posts for p in post})
    if not every:
        return None
    K = int(every[0][1])
    files = [-1] * K_next
    for f, k in every:
        if k != K:
            continue
        who = [j for j in range(K_next) if files[j] < 0 and (f, k) in {tuple(p) for p in posts[j]}]
        if who:
            files[who[0]] = int(f)
    return K, files


def files_round(
    link: ControlLink, watchdog: Watchdog, mine: tuple[Sequence[tuple[int, int]], bool] | None, *, B: int,
    M: int, sizes: np.ndarray | None = None,
) -> tuple[int, list[int]] | None:  # fmt: skip
    """Collective: each worker posts ``mine``, the files it sees (:func:`seen_files`) and whether
    its own file :func:`fits` the storage the job would restore; the master chooses
    (:func:`choose_files`) and shares: the ``K`` the files were written at and the file each worker
    reads, or None when a restore at the link's ``K`` is what the files need (no file; or records
    of ``B`` bytes cut into as many pieces at that ``K`` as at the link's, every worker's file
    fitting and none numbered beyond the link's workers). The same on every rank.

    Where the pieces are cut alike at both (records stored whole, under 2 KiB with ``M = 2``) the
    header does not tell ``K``: the choice says the larger of the smallest ``K`` that cuts them so
    and the highest file number read plus one. Records of many sizes (``sizes``, the same on
    every rank): their ``K`` told by the pieces of a record of their mean size (:func:`_storage_of`)."""
    post = None if mine is None else ([tuple(p) for p in mine[0]], bool(mine[1]))
    got = posts_round(link, watchdog, post, "recut: files")
    with setup_step(link, watchdog, "recut: choice"):
        if not link.is_leader:
            shared = link.share()
            choice = None if shared is None else (int(shared[0]), [int(f) for f in shared[1]])
        else:
            posts: list[tuple[list[tuple[int, int]], bool]] = [p or ([], True) for p in got]
            choice = choose_files([p[0] for p in posts], link.K)
            if choice is not None and _storage_of(B, sizes, choice[0], M).pieces == _storage_of(
                B, sizes, link.K, M
            ).pieces:
                K = max(choice[0], max(choice[1]) + 1)
                restore = all(p[1] for p in posts) and K <= link.K  # each file read as its own, fitting
                choice = None if restore else (K, choice[1])
            link.share(choice)
    return choice


def _plan(
    N: int, B: int, K: int, K_next: int, M: int, posted: list[np.ndarray], placement: Placement,
    sizes: np.ndarray | None = None,
) -> tuple[Any, RecutPlan, list[np.ndarray]]:  # fmt: skip
    """Every rank's plan from the same posts: the storage at ``K_next`` (labels kept), its plan and
    each worker's new pieces. ``sizes``: records of many sizes, each cut by its own length."""
    before, after = _storage_of(B, sizes, K, M), _storage_of(B, sizes, K_next, M)
    seg = _segments_of(N, B, sizes, before, after)
    held = LABELS["kept"](after.start(placement), seg, posted)
    wanted = [np.asarray(held.held_by(j), dtype=np.int64) for j in range(K_next)]
    return held, recut_plan(seg, posted, wanted), wanted


def _pack(src: np.ndarray, srow: np.ndarray, sat: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The bytes ``src[srow[i], sat[i]:sat[i] + n[i]]`` of every span, end to end, in order."""
    out = np.empty(int(n.sum()), dtype=np.uint8)
    _copy_spans(out, np.cumsum(n) - n, src, srow * src.shape[1] + sat, n)
    return out


def _unpack(dst: np.ndarray, drow: np.ndarray, dat: np.ndarray, n: np.ndarray, flat: np.ndarray) -> None:
    """The spans of ``flat`` (:func:`_pack` of the same spans) to ``dst[drow[i], dat[i]:dat[i] + n[i]]``."""
    _copy_spans(dst, drow * dst.shape[1] + dat, flat, np.cumsum(n) - n, n)


def serve_recut(
    link: ControlLink, watchdog: Watchdog, dataset: Dataset, work: Dataset, *, K: int, M: int,
    placement: Placement,
) -> RecutReport:  # fmt: skip
    """Master, collective with :func:`receive_recut` on every worker after :func:`files_round`:
    the workers' storage at the link's ``K'`` of ``placement`` (the first epoch's batches) from
    the pieces of the storage at ``K`` their files hold (the module docstring's steps 2 and 3).
    ``dataset``: the records; ``work``: their pieces at ``K'`` (the scheme's dataset).

    Returns the report (:class:`~.recut.RecutReport`, its ``held`` the storage the job goes on
    from; ``verified``: every worker's verdict)."""
    tic = time.perf_counter()
    old = _storage(dataset, K, M).dataset(dataset)
    with setup_step(link, watchdog, "recut: checksums"):
        link.share_array(old.checksums)
        link.share_array(work.checksums)
    posts = posts_round(link, watchdog, None, "recut: pieces")
    posted = [np.asarray(p[0], dtype=np.int64) for p in posts]
    B, sizes = dataset.record_bytes, _sizes(dataset.lengths)
    with setup_step(link, watchdog, "recut: segments"):
        link.share(posted)
        held, plan, _ = _plan(dataset.N, B, K, link.K, M, posted, placement, sizes)
        seg, n = plan.segments, plan.lengths()
        for k in range(link.K):
            rows = np.flatnonzero((plan.worker == k) & (plan.sender < 0))
            u = plan.segment[rows]
            link.send_rows(k, _pack(dataset.data, seg.record[u], seg.start[u], n[rows]))
    verdicts = posts_round(link, watchdog, None, "recut: verdict")
    ok = all(bool(v) for v in verdicts)
    pieces = (_storage_of(B, sizes, K, M).pieces, _storage_of(B, sizes, link.K, M).pieces)
    dropped = sum(int(p[1]) for p in posts)
    rep = _report(plan, K, link.K, M, pieces, posted, dropped, ok)
    return replace(rep, seconds=time.perf_counter() - tic, held=held, labels="kept")


def _sizes(lengths: np.ndarray | None) -> np.ndarray | None:
    """The records' sizes as every rank cuts them (None: records of one size)."""
    return None if lengths is None else np.asarray(lengths, dtype=np.int64)


def _read(
    path: Path | None, old_sums: np.ndarray, width: int, seed: int, lengths: np.ndarray | None = None
) -> tuple[Cache | None, int, str | None]:
    """The pieces of the file ``path`` (None: none) checked against the old cut's checksums (pieces
    of many sizes: at their ``lengths``), the pieces dropped, and a line when the file is treated
    as absent or pieces are dropped."""
    if path is None:
        return None, 0, None
    try:
        got = load_cache(path, table_dataset(old_sums, width, lengths), seed=seed)
    except (CacheFileError, ValueError, OSError) as exc:
        return None, 0, f"{exc} Treated as absent."
    note = None
    if got.dropped:
        note = f"Cache file {path}: {got.dropped} piece(s) fail their checksum; delivered again."
    return got.cache, got.dropped, note


def receive_recut(
    link: ControlLink, watchdog: Watchdog, folder: str | os.PathLike[str], *, file: int, N: int, B: int,
    K: int, M: int, seed: int, placement: Placement, sizes: np.ndarray | None = None,
) -> tuple[Cache, Any, np.ndarray, list[str]]:  # fmt: skip
    """Worker, collective with :func:`serve_recut`: read its ``file`` of ``folder`` (``-1``: none)
    against the checksums of the pieces at ``K`` (``sizes``: records of many sizes, each cut by
    its own length at both, as every rank computes), post the pieces it holds, receive from the
    master the segments no worker holds, send its peers what the plan says and receive what it
    lacks from them; check every new piece. Returns its storage at the link's ``K'``, the storage
    the job goes on from (every rank's), the checksums at ``K'`` and the lines said of its file.

    Raises :class:`~coded_shuffle.errors.IntegrityError` (after its verdict is posted) when a new
    piece fails its checksum."""
    k = link.worker
    assert k is not None
    old, new = _storage_of(B, sizes, K, M), _storage_of(B, sizes, link.K, M)
    (old_P, old_w, old_lens), (new_P, new_w, new_lens) = (
        (s.pieces, s.piece_bytes(B), s.unit_lengths) for s in (old, new)
    )
    with setup_step(link, watchdog, "recut: checksums"):
        old_sums = link.share_array(np.empty(N * old_P, dtype=np.uint64))
        sums = link.share_array(np.empty(N * new_P, dtype=np.uint64))
    path = cache_path(folder, file) if file >= 0 else None
    own, dropped, note = _read(path, old_sums, old_w, seed, old_lens)
    have = np.empty(0, np.int64) if own is None else np.asarray(own.ids, dtype=np.int64)
    posts_round(link, watchdog, (have, dropped), "recut: pieces")
    with setup_step(link, watchdog, "recut: segments"):
        posted = [np.asarray(p, dtype=np.int64) for p in link.share()]
        held, plan, wanted = _plan(N, B, K, link.K, M, posted, placement, sizes)
        seg, n, mine = plan.segments, plan.lengths(), wanted[k]
        buf = np.zeros((mine.size, new_w), dtype=np.uint8)
        src = plan.worker == k
        rows = np.flatnonzero(src & (plan.sender < 0))
        u = plan.segment[rows]
        got = link.receive_rows(np.empty(int(n[rows].sum()), dtype=np.uint8))
        _unpack(buf, np.searchsorted(mine, seg.new[u]), seg.new_at[u], n[rows], got)
        rows = np.flatnonzero(src & (plan.sender == k))
        if rows.size:
            assert own is not None
            u = plan.segment[rows]
            _unpack(buf, np.searchsorted(mine, seg.new[u]), seg.new_at[u], n[rows],
                    _pack(own.data, own.rows(seg.old[u]), seg.old_at[u], n[rows]))  # fmt: skip
        link.offer(k, {j: [_frame(plan, own, buf, mine, k, j)] for j in range(link.K)
                       if j != k and np.any((plan.worker == j) & (plan.sender == k))})  # fmt: skip
        received = link.collect(k)
    senders = [h for h in range(link.K) if h != k and np.any(src & (plan.sender == h))]
    if len(received) != len(senders):  # pragma: no cover - a peer that did not follow the plan
        raise IntegrityError(
            f"Worker {k}: {len(received)} frames of segments from its peers, not {len(senders)}."
        )
    for h, frame in zip(senders, received, strict=True):
        _take(plan, buf, mine, k, h, np.asarray(frame).reshape(-1))
    lens = None if new_lens is None else new_lens[mine]
    ok = bool(np.array_equal(record_checksums(buf, lens), sums[mine]))
    posts_round(link, watchdog, ok, "recut: verdict")
    if not ok:
        raise IntegrityError(f"Worker {k}: the storage cut again does not match the master's checksums.")
    return Cache(ids=mine, data=buf, lengths=lens), held, sums, [] if note is None else [note]


def _spans(plan: RecutPlan, j: int, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Of the rows that worker ``h`` sends worker ``j``: those it had from the source (relayed,
    from its new storage) first, then those of its old storage; their segments, where they start
    in the sender's row, where in the new piece, and their bytes."""
    rows = np.flatnonzero((plan.worker == j) & (plan.sender == h))
    rows = rows[np.argsort(~plan.relay[rows], kind="stable")]
    u, seg = plan.segment[rows], plan.segments
    sat = np.where(plan.relay[rows], seg.new_at[u], seg.old_at[u])
    return u, sat, seg.new_at[u], plan.lengths()[rows]


def _frame(
    plan: RecutPlan, own: Cache | None, buf: np.ndarray, mine: np.ndarray, k: int, j: int
) -> np.ndarray:
    """The bytes worker ``k`` sends worker ``j``: the relayed spans from its new storage ``buf``
    (pieces ``mine``), then those of its old storage ``own``."""
    u, sat, _, n = _spans(plan, j, k)
    relay = plan.relay[(plan.worker == j) & (plan.sender == k)]
    r = int(relay.sum())
    seg = plan.segments
    first = _pack(buf, np.searchsorted(mine, seg.new[u[:r]]), sat[:r], n[:r])
    if r == u.size:
        return first
    assert own is not None
    return np.concatenate([first, _pack(own.data, own.rows(seg.old[u[r:]]), sat[r:], n[r:])])


def _take(plan: RecutPlan, buf: np.ndarray, mine: np.ndarray, k: int, h: int, flat: np.ndarray) -> None:
    """Worker ``k``: the spans worker ``h`` sent it (:func:`_frame`) into its new storage ``buf``."""
    u, sat, dat, n = _spans(plan, k, h)
    relay = plan.relay[(plan.worker == k) & (plan.sender == h)]
    r = int(relay.sum())
    drow = np.searchsorted(mine, plan.segments.new[u])
    first = int(n[:r].sum())
    _unpack(buf, drow[:r], dat[:r], n[:r], flat[:first])
    _unpack(buf, drow[r:], dat[r:], n[r:], flat[first:])


def serve_recut_start(
    session: Session, dataset: Dataset, work: Dataset, M: int, now: Epoch
) -> RecutReport | None:  # fmt: skip
    """Master of a job started from its workers' files with a storage of ``M > 1`` batches,
    collective with :func:`receive_recut_start`: when the files hold the storage of another
    number of workers (or not the one a restore plans from), the workers' storage of the first
    epoch ``now`` cut again from them (:func:`files_round`, :func:`serve_recut`), the session then
    holding the units ``work``; else None (the storage is restored as usual). The report's
    ``held`` is the storage the job goes on from."""
    link = session.link
    choice = files_round(link, session.dog, None, B=dataset.record_bytes, M=M, sizes=dataset.lengths)
    if choice is None:
        return None
    rep = serve_recut(link, session.dog, dataset, work, K=choice[0], M=M, placement=now.placement)
    session.units = work
    return rep


def receive_recut_start(
    session: Session, folder: str | os.PathLike[str], *, N: int, B: int, seed: int, scheme: Scheme, held: Any,
    now: Epoch,
) -> tuple[Epoch, list[str]] | None:  # fmt: skip
    """A worker's half of :func:`serve_recut_start`: it posts the files it sees in ``folder`` and
    whether its own fits the storage ``held`` a restore plans from (``scheme``'s units of it);
    when the files are cut again, its storage of the first epoch ``now`` at this job's ``K``, held
    by the session (:func:`receive_recut`). Returns the first epoch with the storage the job goes
    on from and the lines said of the files, or None (restored as usual)."""
    link, k, M = session.link, session.link.worker, scheme.M
    assert k is not None
    seen: list[tuple[int, int]] = []
    notes: list[str] = []
    fit = True
    sizes = _sizes(getattr(scheme.holding, "sizes", None))  # records of many sizes: cut by their lengths
    if os.path.isdir(folder):
        seen, notes = seen_files(folder, N=N, B=B, M=M, seed=seed, worker=k, sizes=sizes)
        fit = fits(folder, k, scheme.held(held, k))
    choice = files_round(link, session.dog, (seen, fit), B=B, M=M, sizes=sizes)
    if choice is None:
        return None
    K, files = choice
    cache, new, sums, more = receive_recut(link, session.dog, folder, file=files[k], N=N, B=B, K=K, M=M,
                                           seed=seed, placement=now.placement, sizes=sizes)  # fmt: skip
    session._hold(cache, sums)
    session.lengths = unit_lengths(scheme)  # pieces of many sizes at this K, for its file
    return replace(now, held=new), notes + more
