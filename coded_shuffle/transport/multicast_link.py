"""A link whose master broadcasts go as UDP multicast datagrams: a link of its own, wrapping another.

:class:`MulticastLink` wraps a link between processes (any
:class:`~coded_shuffle.transport.frames.FramedLink`: MPI, torch.distributed) and is a link itself:
its ranks, control plane, unicast, exchange and setup go over the wrapped link's primitives, and
its own :meth:`MulticastLink.send` sends the master's broadcast as datagrams to a group
(:mod:`coded_shuffle.transport.multicast`), except the frames the caller marks as repairs
(``send(frames, repair=True)``), which take the wrapped link's reliable path so that repairs end.

After a delivery's datagrams, the master broadcasts over the wrapped link the bytes of each frame
each worker is to receive (the end of the delivery), gathers what each lacks (the byte spans of
its incomplete frames) and sends each the bytes of its lost datagrams alone (:attr:`stats`
``.resent``): the frames a worker returns are whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

import numpy as np

from ..errors import TransportError
from .base import LinkStats, TokenBucket, _counted
from .control import Transfers, _pickled
from .frames import _BCAST, _UNICAST, FramedLink
from .multicast import MulticastReceiver, MulticastSender, Schedule, max_memberships, missing_spans

__all__ = ["MulticastLink"]

#: A broadcast whose frames travel as multicast datagrams; the control message's third word is
#: then the delivery's number.
_MCAST = 3
#: A multicast broadcast in scoped groups: the end of the delivery is an array of the bytes of
#: each frame each worker is to receive (frames x K, ``int64``).
_SCOPED = 4
#: The tags of what a worker lacks of a multicast delivery, and of the bytes the master sends it again.
_LACKS, _SPANS = 14, 15


class MulticastLink(FramedLink):
    """``link`` (a link with a master) whose master broadcasts go as datagrams to ``group:port``.

    Making it is collective: the master opens its socket and sends a first, empty datagram (so
    that a host without a route for the group says so now), every worker joins the group; if a
    rank cannot, every rank raises :class:`~coded_shuffle.errors.TransportError` with the same
    ``"rank R: why"`` of the first rank that cannot. The wrapped link's settings (pace, pieces,
    buffers, the exchange's schedule) are taken at that moment; use the new link from then on.

    Parameters
    ----------
    link : FramedLink
        The link to wrap: its primitives carry everything but the datagrams.
    group, port : str, int
        The IPv4 multicast group and UDP port (:func:`~coded_shuffle.transport.multicast.parse_group`).
    datagram_bytes : int
        UDP payload a datagram, header included (default 1472).
    idle : float
        The most seconds a worker waits, once the master has sent a delivery's datagrams, for
        those still missing (what is then lacking comes over the wrapped link).
    drop : float
        A share of the datagrams a worker drops on arrival (tests only).
    scope : str
        ``"receivers"`` sends each span of a frame to the scoped group of its readers (a pair's, a
        worker's, or every worker's), where every rank's host lets a socket join the ``K + 1``
        groups of a worker and ``K >= 2``; else, and with ``"all"`` (the default), every datagram
        goes to ``group`` (:attr:`multicast_groups` says which).
    down_mbit : float, optional
        A worker's downlink rate, at which the master keeps the busiest downlink of a delivery.
    snooping : bool
        The switch forwards each group to its members alone.
    racks : sequence of int, optional
        Hosts a rack, where a spine replicates the datagrams to the racks: beyond 64 workers the
        scoped groups' blocks lie inside the racks (:func:`~coded_shuffle.transport._scopes.scope_blocks`).
    """

    _kinds = (_BCAST, _UNICAST, _MCAST, _SCOPED)

    def __init__(
        self,
        link: FramedLink,
        group: str,
        port: int,
        *,
        datagram_bytes: int = 1472,
        idle: float = 1.0,
        drop: float = 0.0,
        scope: str = "all",
        down_mbit: float | None = None,
        snooping: bool = False,
        racks: tuple[int, ...] | None = None,
    ) -> None:
        if not isinstance(link, FramedLink):
            raise TypeError(f"Argument 'link' must be a FramedLink, not {type(link).__name__}.")
        if scope not in ("receivers", "all"):
            raise ValueError(f"Argument 'scope' must be 'receivers' or 'all', not {scope!r}.")
        if link.peers:  # the same answer on every rank, with no exchange
            raise TransportError("a job of peers has no master's broadcast to multicast")
        super().__init__(
            rank=link.rank, size=link.size, root=link.root, pace=link.pace, piece_bytes=link.piece_bytes,
            reuse_buffers=link.reuse_buffers,
        )  # fmt: skip
        #: The wrapped link.
        self.inner = link
        self.exchange_schedule = link.exchange_schedule
        self.exchange_pace = link.exchange_pace
        rooms = link._gather_values(max_memberships())
        room = link.share(None if rooms is None else min(rooms))
        K = self.K if scope == "receivers" and 2 <= self.K and self.K + 1 <= room else None
        #: The groups the master's datagrams go to: 1, or the scoped groups of K workers.
        self.multicast_groups = 1 if K is None else 1 + K * (K - 1) // 2 + K
        self._mc_send: MulticastSender | None = None
        self._mc_recv: MulticastReceiver | None = None
        self._deliveries = 0
        #: Master: multicast deliveries of which no worker received a byte (all came by the repairs).
        self.multicast_lost_all = 0
        #: Worker: bytes of lost datagrams received again over the wrapped link.
        self.resent_bytes = 0
        problem = None
        try:
            if self.is_master:
                down = None if down_mbit is None else down_mbit * 1e6 / 8
                self._mc_send = MulticastSender(
                    group, port, datagram_bytes=datagram_bytes, pace=self.pace, K=K, down=down,
                    snooping=snooping, racks=racks,
                )  # fmt: skip
                self._mc_send.send([np.empty(0, dtype=np.uint8)], 0)
            else:
                worker = None if K is None else self.worker
                self._mc_recv = MulticastReceiver(
                    group, port, idle=idle, drop=drop, seed=self.rank, worker=worker, K=K,
                    racks=None if K is None else racks,
                )  # fmt: skip
        except (TransportError, ValueError, OSError) as exc:
            problem = str(exc)
        problems = link._gather_values(problem)
        failed = link.share(None if problems is None else next(
            (f"rank {r}: {p}" for r, p in enumerate(problems) if p is not None), None
        ))  # fmt: skip
        if failed is not None:
            self.close()
            raise TransportError(failed)

    # ---- the wrapped link's primitives

    def _bcast_raw(self, arr: np.ndarray) -> None:
        self.inner._bcast_raw(arr)

    def _pairwise_raw(
        self, sends: Transfers, recvs: Transfers, *, tag: int, pace: TokenBucket | None = None
    ) -> None:
        self.inner._pairwise_raw(sends, recvs, tag=tag, pace=pace)

    def _msg_send(self, data: np.ndarray, rank: int, tag: int) -> Callable[[], object]:
        return self.inner._msg_send(data, rank, tag)

    def _msg_recv(self, rank: int, tag: int, deadline: float) -> np.ndarray | None:
        return self.inner._msg_recv(rank, tag, deadline)

    def _barrier(self) -> None:
        self.inner._barrier()

    def _alltoall_raw(self, send: list[list[np.ndarray]], *, kept: bool = False) -> list[np.ndarray]:
        return self.inner._alltoall_raw(send, kept=kept)

    def abort(self, status: int) -> NoReturn:
        """End the whole job now (the wrapped link's abort)."""
        self.inner.abort(status)

    def close(self) -> None:
        """Close the multicast socket of this rank (the wrapped link stays open)."""
        for end in (self._mc_send, self._mc_recv):
            if end is not None:
                end.close()
        self._mc_send = self._mc_recv = None

    # ---- the master's broadcast as datagrams

    def send(self, frames: Sequence[np.ndarray], *, repair: bool = False) -> None:
        """Master: broadcast ``frames`` to every worker as datagrams, or, with ``repair``, over
        the wrapped link's reliable path (module docstring)."""
        if repair or self._mc_send is None:
            super().send(frames, repair=repair)
            return
        checked = self._checked(frames)
        table = np.array([[f.shape[0], -1] for f in checked], dtype=np.int64).reshape(-1, 2)
        self._deliveries += 1
        plan = self._mc_send.schedule(checked)
        self._control(_SCOPED if self._mc_send.K is not None else _MCAST, table, third=self._deliveries)
        self._mc_send.send(checked, self._deliveries, plan)
        # after the datagrams, the end of the delivery: the bytes of each frame each worker is
        # to receive (frames x K scoped, else frames x 1), read once they are all sent
        self._bcast_raw(plan.expected)
        self.control_bytes += plan.expected.nbytes
        resent = self._resend_lost(checked, plan)
        s = _counted(self._stats, checked)
        self._stats = LinkStats(s.frames, s.symbols, s.bytes + resent, s.resent + resent)

    def _resend_lost(self, frames: list[np.ndarray], plan: Schedule) -> int:
        """Master, after a multicast delivery: gather what each worker lacks of it (None, or the
        spans received of each frame it could not complete) and send each that lacks some, in
        one message, the spans it lacks (:func:`~coded_shuffle.transport.multicast.missing_spans`)
        and their bytes, paced as the link is; return the bytes of the spans sent. A worker that
        lacks nothing waits for nothing."""
        assert self._mc_send is not None
        posts = self._gather_values(None, _LACKS)
        assert posts is not None
        K = self._mc_send.K
        waits: list[Callable[[], object]] = []
        resent, lost_all = 0, True
        for k in range(self.K):
            rank = self.rank_of(k)
            got = posts[rank]
            rows = missing_spans(plan, k, got or {}, K=K, racks=self._mc_send.racks)
            lost = int((rows[:, 2] - rows[:, 1]).sum())
            wanted = int(plan.expected[:, k if K is not None else 0].sum())
            lost_all &= wanted > 0 and lost == wanted
            if got is None:
                continue
            data = np.concatenate([frames[q][lo:hi] for q, lo, hi in rows.tolist()] or [rows[:0, 0]])
            if self.pace is not None:
                self.pace.consume(int(rows.nbytes) + lost)
            waits.append(self._msg_send(_pickled((rows, data.view(np.uint8))), rank, _SPANS))
            resent += lost
        for wait in waits:
            wait()
        self.multicast_lost_all += bool(lost_all and self.K)
        return resent

    # ---- a worker's side

    def _frames_of(self, worker: int, kind: int, piece: int, table: np.ndarray) -> Iterator[np.ndarray]:
        if kind not in (_MCAST, _SCOPED):
            yield from super()._frames_of(worker, kind, piece, table)
            return
        assert self._mc_recv is not None
        delivery, sizes, scoped = piece, table[:, 0].tolist(), kind == _SCOPED
        every = np.empty((len(sizes), self.K if scoped else 1), dtype=np.int64)
        self._mc_recv.reserve(sum(sizes))  # the socket holds the delivery, were it read late
        self._bcast_raw(every)  # the end of the delivery
        expected = every[:, worker if scoped else 0].tolist()
        got, lacking = self._mc_recv.gather(delivery, sizes, expected)
        self._gather_values(lacking or None, _LACKS)
        if lacking:  # the spans it lacks and their bytes
            rows, data = self._values([self.root], _SPANS, float("inf"))[self.root]
            at = 0
            for q, lo, hi in rows.tolist():
                got[q][lo:hi] = data[at : at + hi - lo]
                at += hi - lo
            self.resent_bytes += int(data.shape[0])
        for buf in got:
            buf.flags.writeable = False
        yield from got

    @property
    def dropped_bytes(self) -> int:
        """Worker: bytes of the datagrams it dropped on purpose (``drop``; 0 on the master)."""
        return 0 if self._mc_recv is None else self._mc_recv.dropped_bytes
