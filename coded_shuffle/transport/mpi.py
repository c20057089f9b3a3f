"""The MPI transport: frames, setup and the protocol's control messages between processes
(the package's only import of ``mpi4py``, lazily, here and in :mod:`._mpi_ranks`, the start, the
markers and the end of a job's ranks)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from .._checks import check_int
from ..errors import RankTimeout, TransportError
from ._mpi_ranks import (
    ended_ranks,
    launch_rank,
    mark_rank,
    mpi_abort,
    mpi_exit,
    mpi_refuse,
    mpi_start,
    mpi_world,
    rank_markers,
)
from .base import LinkStats, TokenBucket
from .frames import FramedLink

__all__ = [
    "MPITransport", "PROBE_PHASES", "mpi_world", "mpi_start", "launch_rank", "mark_rank", "rank_markers",
    "ended_ranks", "mpi_exit", "mpi_refuse", "mpi_abort",
]  # fmt: skip

#: Tag of point-to-point frame pieces, and of the rows of each worker's first batch.
_TAG, _INIT_TAG = 7, 11
#: The tag of the exchange's rounds between workers.
_ROUND_TAG = 13
#: The tags of what a worker lacks of a multicast delivery, and of the bytes the master sends
#: it again.
_LACKS, _SPANS = 14, 15


#: Tags of the protocol's control messages: a worker's post, the master's word.
_POST, _WORD = 21, 22
#: Tag of the bytes of a probe of the links (:meth:`MPITransport.probe_phases`).
_PROBE = 31
#: The phases of a probe, in the order they run.
PROBE_PHASES = ("master_all", "master_one", "ring", "incast")


def _poll(ready: Callable[[], bool], deadline: float) -> bool:
    """Call ``ready()`` until it is true (True) or ``deadline`` passes (False), sleeping between calls.

    The sleeps grow from 50 to 250 microseconds, so that a waiting rank leaves its core to the
    ranks that compute, and a quick answer is still seen at once.
    """
    pause = 5e-5
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(2.5e-4, pause * 2)
    return True


class MPITransport(FramedLink):
    """The shared link over MPI: rank ``root`` is the master, the other ranks the ``K`` workers.

    Worker ``k`` is the ``k``-th rank other than ``root`` (rank ``k + 1`` when ``root = 0``).
    Every call on the master is matched by one :meth:`receive` on every worker, in order; they
    are collective over the communicator. Before the frames the master broadcasts a small control
    message (kind, number of frames, piece size, then each frame's size and destination), counted
    apart in :attr:`control_bytes` (512 bytes a delivery of up to 30 frames): :attr:`stats`
    counts frames only, each once, as on a shared link.

    Frames travel whole or in pieces of ``piece_bytes`` (``MPI_Bcast`` of slices of one buffer),
    never one message per record. With ``pace``, the master waits on the bucket before each piece,
    so pieces are kept small enough (50 ms of the link) for the pacing to be smooth.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The communicator (default ``MPI.COMM_WORLD``); at least 2 ranks.
    root : int
        The master's rank.
    pace : TokenBucket, optional
        Pace what leaves the master (both broadcasts and point-to-point sends).
    piece_bytes : int, optional
        Largest piece of a frame per MPI call (default: whole frames up to 64 MiB unpaced).
    reuse_buffers : bool
        Workers receive into one buffer kept across deliveries (default); see :meth:`receive`.
    """

    def __init__(
        self,
        comm: Any = None,
        *,
        root: int = 0,
        pace: TokenBucket | None = None,
        piece_bytes: int | None = None,
        reuse_buffers: bool = True,
        peers: bool = False,
    ) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD if comm is None else comm
        size = self.comm.Get_size()
        #: A job of peers: every rank a worker, rank ``root`` also the leader of the control rounds.
        self.peers = bool(peers)
        if self.peers:
            self._init_peers(size, root)
            return
        if size < 2:
            raise ValueError(f"Argument 'comm' must have at least 2 ranks (master and a worker), not {size}.")
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        self._pace = pace
        if piece_bytes is None:
            piece_bytes = 1 << 26 if pace is None else min(1 << 26, max(1 << 16, int(pace.rate / 20)))
        self.piece_bytes = check_int(piece_bytes, "piece_bytes", minimum=1)
        self.K = size - 1
        self.rank = self.comm.Get_rank()
        self.is_master = self.rank == self.root
        #: This rank's worker number, or None on the master.
        self.worker: int | None = None if self.is_master else self.rank - (self.rank > self.root)
        self.reuse_buffers = bool(reuse_buffers)
        self._buffer: np.ndarray | None = None
        self._group: Any = None  # the workers' own communicator, made at their first exchange
        #: Bytes this worker sent other workers (:meth:`collect`).
        self.exchanged_bytes = 0
        self._stats = LinkStats()
        #: Bytes of control messages the master broadcast (frame sizes and destinations).
        self.control_bytes = 0

    def _init_peers(self, size: int, root: int) -> None:
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        self._pace = None
        self.piece_bytes = 1 << 26
        self.K = size
        self.rank = self.comm.Get_rank()
        self.is_master = False
        self.worker = self.rank
        self.reuse_buffers = True
        self._buffer = None
        self._group = self.comm  # every rank exchanges
        self.exchanged_bytes = 0
        self._stats = LinkStats()
        self.control_bytes = 0

    @property
    def pace(self) -> TokenBucket | None:
        """The bucket pacing the master's sends, if any."""
        return self._pace

    @property
    def _workers(self) -> Any:
        """The workers' own communicator, for exchanges between them. Made at their first
        exchange (``MPI_Comm_create_group``, collective over the workers alone), so that making
        the link waits for no other rank."""
        if self._group is None:
            world = self.comm.Get_group()
            workers = world.Excl([self.root])
            self._group = self.comm.Create_group(workers)
            workers.Free()
            world.Free()
        return self._group

    def open_multicast(
        self,
        group: str,
        port: int,
        *,
        datagram_bytes: int = 1472,
        idle: float = 1.0,
        drop: float = 0.0,
        scope: str = "all",
        down_mbit: float | None = None,
        snooping: bool = False,
    ) -> str | None:
        """Send the master's broadcasts as UDP multicast datagrams to ``group:port``
        (:mod:`coded_shuffle.transport.multicast`): the master sends a first, empty datagram (so
        that a host without a route for the group says so now), every worker joins the group.
        Collective: every rank returns None, or the same ``"rank R: why"`` of the first rank that
        cannot. ``idle``: the most seconds a worker waits, once the master has sent a
        delivery's datagrams, for those still missing (what is then lacking comes over MPI);
        ``drop``: a share of the datagrams a worker drops on arrival (tests only).

        ``scope``: ``"receivers"`` sends each span of a frame to the scoped group of its
        readers (a pair's, a worker's, or every worker's), where every rank's host lets a socket
        join the ``K + 1`` groups of a worker and ``K >= 2``; else, and with ``"all"`` (the
        default), every datagram goes to ``group`` (:attr:`multicast_groups` says which).
        ``down_mbit``: a worker's downlink rate, at which the master keeps the busiest downlink
        of a delivery;
        ``snooping``: the switch forwards each group to its members alone.
        """
        from mpi4py import MPI

        from .multicast import MulticastReceiver, MulticastSender, max_memberships

        if scope not in ("receivers", "all"):
            raise ValueError(f"Argument 'scope' must be 'receivers' or 'all', not {scope!r}.")
        if self.peers:  # the same answer on every rank, with no exchange
            return "a job of peers has no master's broadcast to multicast"
        room = self.comm.allreduce(max_memberships(), op=MPI.MIN)
        K = self.K if scope == "receivers" and 2 <= self.K and self.K + 1 <= room else None
        #: The groups the master's datagrams go to: 1, or the scoped groups of K workers.
        self.multicast_groups = 1 if K is None else 1 + K * (K - 1) // 2 + K
        down = None if down_mbit is None else down_mbit * 1e6 / 8
        problem = None
        try:
            if self.is_master:
                self._mc_send = MulticastSender(
                    group, port, datagram_bytes=datagram_bytes, pace=self._pace, K=K, down=down,
                    snooping=snooping,
                )  # fmt: skip
                self._mc_send.send([np.empty(0, dtype=np.uint8)], 0)
            else:
                worker = None if K is None else self.worker
                self._mc_recv = MulticastReceiver(
                    group, port, idle=idle, drop=drop, seed=self.rank, worker=worker, K=K
                )
        except (TransportError, ValueError, OSError) as exc:
            problem = str(exc)
        failed = [(r, p) for r, p in enumerate(self.comm.allgather(problem)) if p is not None]
        return f"rank {failed[0][0]}: {failed[0][1]}" if failed else None

    # ---- the link's primitives (frames.FramedLink does the framing)

    def _bcast_raw(self, arr: np.ndarray) -> None:
        self.comm.Bcast(arr, root=self.root)

    def _send_raw(self, arr: np.ndarray, dest: int) -> None:
        self.comm.Send(arr, dest=dest, tag=_TAG)

    def _send_all_raw(self, pieces: list[tuple[np.ndarray, int]], pace: TokenBucket | None) -> None:
        """Every piece in flight at once (``MPI_Isend``), posted in turn as ``pace`` allows."""
        from mpi4py import MPI

        reqs = []
        for arr, dest in pieces:
            if pace is not None:
                pace.consume(arr.shape[0])
            reqs.append(self.comm.Isend(arr, dest=dest, tag=_TAG))
        MPI.Request.Waitall(reqs)

    def _recv_raw(self, bufs: list[np.ndarray]) -> None:
        from mpi4py import MPI

        MPI.Request.Waitall([self.comm.Irecv(b, source=self.root, tag=_TAG) for b in bufs])

    def _gather_obj(self, value: Any) -> list[Any] | None:
        # point to point, the master polling and sleeping between probes (not MPI_Gather, whose
        # wait spins on a core the workers' receiving threads need)
        if not self.is_master:
            self.comm.isend(value, dest=self.root, tag=_LACKS).wait()
            return None
        got: dict[int, Any] = {}
        ranks = [self.rank_of(k) for k in range(self.K)]

        def ready() -> bool:
            for r in ranks:
                if r not in got and (msg := self.comm.improbe(source=r, tag=_LACKS)) is not None:
                    got[r] = msg.recv()
            return len(got) == len(ranks)

        _poll(ready, float("inf"))
        return [got.get(r) for r in range(self.comm.Get_size())]

    def _send_objs(self, sends: list[tuple[Any, int]]) -> None:
        from mpi4py import MPI

        MPI.Request.waitall([self.comm.isend(value, dest=rank, tag=_SPANS) for value, rank in sends])

    def _recv_obj(self) -> Any:
        # polled, sleeping between probes: a blocking receive would spin on a core the master needs
        got: list[Any] = []

        def ready() -> bool:
            msg = self.comm.improbe(source=self.root, tag=_SPANS)
            if msg is not None:
                got.append(msg.recv())
            return bool(got)

        _poll(ready, float("inf"))
        return got[0]

    # ---- setup: what every rank learns before the first transition (not counted on the link)

    def share(self, value: Any = None) -> Any:
        """Collective: the leader's ``value`` (a small Python object), returned on every rank."""
        return self.comm.bcast(value if self.is_leader else None, root=self.root)

    def abort(self, status: int) -> NoReturn:
        """End the whole job now (:func:`mpi_abort`)."""
        mpi_abort(status)

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the leader's array copied into ``arr`` on every rank (same shape and dtype)."""
        self.comm.Bcast(np.ascontiguousarray(arr) if self.is_leader else arr, root=self.root)
        return arr

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """Master: send ``worker`` its first batch of rows (setup, point to point)."""
        self._master_only("send rows")
        self.comm.Send(np.ascontiguousarray(rows), dest=self.rank_of(worker), tag=_INIT_TAG)

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """Worker: receive into ``out`` the rows the master sent it with :meth:`send_rows`."""
        self.comm.Recv(out, source=self.root, tag=_INIT_TAG)
        return out

    def baseline_broadcast(self, nbytes: int) -> float | None:
        """Collective: one plain ``MPI_Bcast`` of ``nbytes`` bytes, the yardstick of a delivery.

        Returns, on the master, the slowest worker's seconds to receive it (None elsewhere).
        """
        n = int(self.share(int(nbytes)))
        buf = np.ones(n, dtype=np.uint8)
        self.sync()
        t0 = time.perf_counter()
        self.comm.Bcast(buf, root=self.root)
        took = time.perf_counter() - t0
        got = self.comm.gather(None if self.is_master else took, root=self.root)
        return None if got is None else max(v for v in got if v is not None)

    def sync(self) -> None:
        """Collective: wait until every rank is here (``MPI_Barrier``), before a delivery is timed."""
        self.comm.Barrier()

    def probe_phases(self, nbytes: int) -> dict[str, float] | None:
        """Collective: time four transfers of ``nbytes`` bytes, each between two barriers, and
        return, on the leading rank, each one's seconds (the slowest rank's) by name (None
        elsewhere):

        ``master_all``
            the master sends ``nbytes`` to every worker at once (``K nbytes`` on its uplink; its
            pace, if any, applies), so ``K nbytes`` over it is the master's rate;
        ``master_one``
            the master sends ``nbytes`` to worker 0 alone: the least of the master's rate and a
            worker's downlink;
        ``ring``
            worker ``k`` sends ``nbytes`` to worker ``k + 1`` (mod ``K``), all at once: each
            worker's uplink and downlink carry ``nbytes``;
        ``incast``
            the other workers send worker 0 ``nbytes`` in all, at once: its downlink carries
            ``nbytes``, each uplink a ``K - 1``-th of it.

        A job of peers has no master: its two phases are left out; with one worker, so are the
        workers' two.
        """
        n = check_int(nbytes, "nbytes", minimum=1)
        buf = np.ones(n, dtype=np.uint8)
        K, w = self.K, self.worker
        took: dict[str, float] = {}
        if not self.peers:
            to_all = [(buf, self.rank_of(k)) for k in range(K)] if self.is_master else []
            from_master = [] if self.is_master else [(n, self.root)]
            took["master_all"] = self._timed(to_all, from_master)
            took["master_one"] = self._timed(to_all[:1], from_master if w == 0 else [])
        if K > 1:
            ring = [] if w is None else [(buf, self.rank_of((w + 1) % K))]
            took["ring"] = self._timed(ring, [] if w is None else [(n, self.rank_of((w - 1) % K))])
            share = -(-n // (K - 1))
            into = [(buf[:share], self.rank_of(0))] if w else []
            others = [(share, self.rank_of(k)) for k in range(1, K)] if w == 0 else []
            took["incast"] = self._timed(into, others)
        return took if self.is_leader else None

    def _timed(self, sends: list[tuple[np.ndarray, int]], recvs: list[tuple[int, int]]) -> float:
        """Collective: between two barriers, send each ``(buffer, rank)`` and receive each
        ``(bytes, rank)`` at once; the slowest rank's seconds."""
        from mpi4py import MPI

        self.comm.Barrier()
        t0 = time.perf_counter()
        reqs = [self.comm.Irecv(np.empty(nb, np.uint8), source=src, tag=_PROBE) for nb, src in recvs]
        for b, dest in sends:
            if self.is_master and self._pace is not None:
                self._pace.consume(b.shape[0])
            reqs.append(self.comm.Isend(b, dest=dest, tag=_PROBE))
        MPI.Request.Waitall(reqs)
        return float(self.comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))

    # ---- the protocol's control messages (small Python values, point to point, with deadlines)

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """Master: one post from every worker, in worker order, each within ``timeout`` seconds
        (among peers, the leader's own slot is left None for its driver to fill).

        Raises
        ------
        RankTimeout
            Naming the workers (and ranks) that did not post within ``timeout`` seconds.
        """
        self._lead_only("gather the posts")
        got: list[Any] = [None] * self.K
        missing = set(self._posters())  # among peers the leader's own post is its driver's

        def ready() -> bool:
            for k in sorted(missing):
                msg = self.comm.improbe(source=self.rank_of(k), tag=_POST)
                if msg is not None:
                    got[k] = msg.recv()
                    missing.discard(k)
            return not missing

        if not _poll(ready, time.monotonic() + timeout):
            who = ", ".join(f"worker {k} (rank {self.rank_of(k)})" for k in sorted(missing))
            raise RankTimeout(f"no answer from {who} within {timeout:g} s, at the {stage!r} round")
        return got

    def announce(self, word: Any) -> None:
        """Master: send ``word`` to every worker."""
        self._lead_only("announce")
        reqs = [self.comm.isend(word, dest=self.rank_of(k), tag=_WORD) for k in self._posters()]
        from mpi4py import MPI

        MPI.Request.waitall(reqs)

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """Worker: send ``value`` to the master; return the master's next word, within ``timeout`` s.

        Raises
        ------
        RankTimeout
            When the master sends no word within ``timeout`` seconds.
        """
        if self.is_leader:
            raise TransportError(f"Rank {self.rank} leads the rounds: only the other ranks post.")
        req = self.comm.isend(value, dest=self.root, tag=_POST)
        word: list[Any] = []

        def ready() -> bool:
            msg = self.comm.improbe(source=self.root, tag=_WORD)
            if msg is not None:
                word.append(msg.recv())
            return bool(word)

        if not _poll(ready, time.monotonic() + timeout):
            who = "the leader" if self.peers else "the master"
            raise RankTimeout(
                f"no word from {who} (rank {self.root}) within {timeout:g} s, at the {stage!r} round"
            )
        req.wait()
        return word[0]

    def _round_raw(self, send: np.ndarray | None, to: int, recv: np.ndarray | None, frm: int) -> None:
        """Worker: one round of the exchange, ``MPI_Isend`` to ``to`` and ``MPI_Irecv`` from ``frm``
        among the workers, then ``MPI_Waitall`` (no other rank waits on it)."""
        from mpi4py import MPI

        reqs = []
        if recv is not None and recv.shape[0]:
            reqs.append(self._workers.Irecv(recv, source=frm, tag=_ROUND_TAG))
        if send is not None and send.shape[0]:
            reqs.append(self._workers.Isend(send, dest=to, tag=_ROUND_TAG))
        MPI.Request.Waitall(reqs)

    #: Most bytes one ``MPI_Alltoallv`` call moves into or out of a rank: counts and displacements
    #: are C ints. A larger exchange goes in rounds, each under it.
    max_call_bytes = 2**31 - 1

    def _alltoall_raw(self, send: list[list[np.ndarray]]) -> list[np.ndarray]:
        """Worker: ``MPI_Alltoallv`` of bytes among the workers, after one ``MPI_Alltoall`` of the
        counts (the master takes no part); in rounds when a rank would move more than
        :attr:`max_call_bytes`."""
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers exchange frames.")
        counts = np.array([sum(b.shape[0] for b in bs) for bs in send], dtype=np.int64)
        recv = np.empty(self.K, dtype=np.int64)
        self._workers.Alltoall(counts, recv)
        # Every rank knows every count after one more Allgather, so all agree on the rounds.
        every = np.empty((self.K, self.K), dtype=np.int64)
        self._workers.Allgather(counts, every)
        share = max(1, self.max_call_bytes // self.K)  # a pair's bytes a round: K pairs stay under it
        rounds = max(1, -(-int(every.max(initial=0)) // share))
        if rounds == 1:  # one call, packed once and received in place
            parts = [b for bs in send for b in bs]
            data = np.concatenate(parts) if parts else np.empty(0, np.uint8)
            whole = np.empty(int(recv.sum()), dtype=np.uint8)
            send_d = np.concatenate(([0], np.cumsum(counts)[:-1]))
            recv_d = np.concatenate(([0], np.cumsum(recv)[:-1]))
            self._workers.Alltoallv([data, (counts, send_d)], [whole, (recv, recv_d)])
            return [whole[lo : lo + n] for lo, n in zip(recv_d.tolist(), recv.tolist(), strict=True)]
        out = [np.empty(int(n), dtype=np.uint8) for n in recv]
        flat = [np.concatenate(bs) if bs else np.empty(0, np.uint8) for bs in send]
        for r in range(rounds):
            lo = r * share
            part = np.clip(counts - lo, 0, share)
            got = np.clip(recv - lo, 0, share)
            data = np.concatenate([b[lo : lo + n] for b, n in zip(flat, part.tolist(), strict=True)])
            buf = np.empty(int(got.sum()), dtype=np.uint8)
            send_d = np.concatenate(([0], np.cumsum(part)[:-1]))
            recv_d = np.concatenate(([0], np.cumsum(got)[:-1]))
            self._workers.Alltoallv([data, (part, send_d)], [buf, (got, recv_d)])
            for j, (d, n) in enumerate(zip(recv_d.tolist(), got.tolist(), strict=True)):
                out[j][lo : lo + n] = buf[d : d + n]
        return out
