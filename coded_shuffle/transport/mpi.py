"""The MPI transport: frames, setup and the protocol's control messages between processes
(the package's only import of ``mpi4py``, lazily, here and in :mod:`._mpi_ranks`, the start, the
markers and the end of a job's ranks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from ..errors import TransportError
from ._mpi_ranks import (
    ALIVE,
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
from .base import TokenBucket
from .control import PROBE_PHASES, Transfers, _poll
from .frames import FramedLink

__all__ = [
    "MPITransport", "PROBE_PHASES", "mpi_world", "mpi_start", "launch_rank", "mark_rank", "rank_markers",
    "ended_ranks", "ALIVE", "mpi_exit", "mpi_refuse", "mpi_abort",
]  # fmt: skip


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
        if size < 2 and not peers:
            raise ValueError(f"Argument 'comm' must have at least 2 ranks (master and a worker), not {size}.")
        if peers:  # every rank a worker: nothing leaves a master to pace
            pace, piece_bytes, reuse_buffers = None, None, True
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        if piece_bytes is None:
            piece_bytes = 1 << 26 if pace is None else min(1 << 26, max(1 << 16, int(pace.rate / 20)))
        super().__init__(
            rank=self.comm.Get_rank(), size=size, root=root, peers=peers, pace=pace, piece_bytes=piece_bytes,
            reuse_buffers=reuse_buffers,
        )  # fmt: skip
        # the workers' own communicator (every rank among peers), made at their first exchange
        self._group: Any = self.comm if self.peers else None

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

    # ---- the link's primitives (control.ControlPlane and frames.FramedLink do the rest)

    def _bcast_raw(self, arr: np.ndarray) -> None:
        self.comm.Bcast(arr, root=self.root)

    def _pairwise_raw(
        self, sends: Transfers, recvs: Transfers, *, tag: int, pace: TokenBucket | None = None
    ) -> None:
        """Every transfer in flight at once (``MPI_Irecv``, then ``MPI_Isend`` posted in turn as
        ``pace`` allows), then ``MPI_Waitall``."""
        from mpi4py import MPI

        reqs = [self.comm.Irecv(b, source=src, tag=tag) for b, src in recvs]
        for arr, dest in sends:
            if pace is not None:
                pace.consume(arr.shape[0])
            reqs.append(self.comm.Isend(arr, dest=dest, tag=tag))
        MPI.Request.Waitall(reqs)

    def _msg_send(self, data: np.ndarray, rank: int, tag: int) -> Callable[[], object]:
        return self.comm.Isend(data, dest=rank, tag=tag).Wait  # the request holds ``data`` until sent

    def _msg_recv(self, rank: int, tag: int, deadline: float) -> np.ndarray | None:
        """Polled (a matched probe, then the receive), sleeping between probes: a blocking receive
        would spin on a core the ranks that compute need."""
        from mpi4py import MPI

        status = MPI.Status()
        got: list[np.ndarray] = []

        def ready() -> bool:
            msg = self.comm.Improbe(source=rank, tag=tag, status=status)
            if msg is not None:
                got.append(np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8))
                msg.Recv(got[0])
            return bool(got)

        return got[0] if _poll(ready, deadline) else None

    def _barrier(self) -> None:
        self.comm.Barrier()

    def abort(self, status: int) -> NoReturn:
        """End the whole job now (:func:`mpi_abort`)."""
        mpi_abort(status)

    #: Most bytes one ``MPI_Alltoallv`` call moves into or out of a rank: counts and displacements
    #: are C ints. A larger exchange goes in rounds, each under it.
    max_call_bytes = 2**31 - 1

    def _alltoall_raw(self, send: list[list[np.ndarray]], *, kept: bool = False) -> list[np.ndarray]:
        """Worker: ``MPI_Alltoallv`` of bytes among the workers, after one ``MPI_Alltoall`` of the
        counts (the master takes no part); in rounds when a rank would move more than
        :attr:`max_call_bytes`; with ``kept``, into the exchange's buffer the link keeps. With
        :attr:`exchange_pace`, point to point instead, each send paced
        (:meth:`FramedLink._alltoall_raw`): a collective cannot be."""
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers exchange frames.")
        if self.exchange_pace is not None:
            return super()._alltoall_raw(send, kept=kept)
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
            n = int(recv.sum())
            whole = self._exchange_into(n, kept=kept)
            send_d = np.concatenate(([0], np.cumsum(counts)[:-1]))
            recv_d = np.concatenate(([0], np.cumsum(recv)[:-1]))
            self._workers.Alltoallv([data, (counts, send_d)], [whole, (recv, recv_d)])
            return [whole[lo : lo + n] for lo, n in zip(recv_d.tolist(), recv.tolist(), strict=True)]
        ends = np.cumsum(recv).tolist()
        whole = self._exchange_into(ends[-1], kept=kept)
        out = [whole[e - int(n) : e] for e, n in zip(ends, recv.tolist(), strict=True)]
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
