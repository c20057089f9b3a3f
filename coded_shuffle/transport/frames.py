"""The framing of a delivery over a link between processes, written once for every such link.

One call on the master (:meth:`FramedLink.send`, a broadcast, or :meth:`FramedLink.send_to`,
point to point) is matched by one :meth:`FramedLink.receive` on every worker. Ahead of the frames
the master broadcasts a small control message: the kind, the number of frames, the piece size,
then each frame's size and destination (inline for up to ``_INLINE_FRAMES`` frames, else in a
second broadcast), counted apart in ``control_bytes``. Frames travel whole or in pieces of
``piece_bytes``, each paced by the link's bucket if it has one; the workers receive into one
buffer kept and grown across deliveries.

The workers' exchange (a scheme whose workers send each other frames,
:class:`~coded_shuffle.engine.schemes.ExchangeScheme`) is :meth:`FramedLink.offer`, which only
keeps a worker's frames, then :meth:`FramedLink.collect`, one collective among the workers over
an all-to-all of byte buffers. An offer with rounds (each a matching,
:func:`~coded_shuffle.plan.exchange_rounds`) goes in those rounds, one send and one receive of a
worker each, with no barrier between rounds, when ``exchange_schedule = "rounds"`` (else all at
once, the default); :meth:`FramedLink.collect_each` gives each round's frames as soon as that
round is in, before the next round starts, so that they are decoded while it travels. An
exchange, in rounds or all at once, is received into one buffer the link keeps across exchanges,
its pages touched at the offer, before the delivery: pages touched for the first time inside a
transfer are zeroed by the kernel on the receiving rank's core, which on namespaced hosts
sharing two cores cost the transfers more than their bytes (docs/benchmarks.md). With
:attr:`FramedLink.exchange_pace` (a bucket at the worker's uplink rate), a worker's sends of the
exchange, all at once or in rounds, go in pieces paced by it, point to point.

A link implements the primitives of :class:`~coded_shuffle.transport.control.ControlPlane` (a
broadcast from the root, tagged messages, sends and receives between ranks at once, a barrier,
an abort); all the rest, here and there, is written once. It may override
:meth:`FramedLink._alltoall_raw` with a collective of its own (MPI's ``Alltoallv``). A link that
carries a broadcast another way (:class:`~coded_shuffle.transport.multicast_link.MulticastLink`)
wraps this one and adds kinds of control message (:attr:`FramedLink._kinds`).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping, Sequence
from itertools import zip_longest
from typing import Any

import numpy as np

from .._checks import check_int
from ..codec._common import _aligned_empty
from ..errors import TransportError
from .base import LinkStats, TokenBucket, _as_frame, _counted, _offers, _rounds, _unicast
from .control import _ROUND_TAG, _TAG, ControlPlane, Transfers, _pickled

#: Control message kinds sent ahead of the frames of one ``send`` or ``send_to``.
_BCAST, _UNICAST = 1, 2

#: Words of the fixed control message; the sizes of up to ``_INLINE_FRAMES`` frames travel in it.
_CONTROL_WORDS = 64

_INLINE_FRAMES = (_CONTROL_WORDS - 3) // 2


class FramedLink(ControlPlane):
    """What the links between processes share: their state, the frames' control message, pieces
    and buffers, the workers' exchange, and (from
    :class:`~coded_shuffle.transport.control.ControlPlane`) the control plane; a link implements
    the primitives and calls this constructor.

    Parameters
    ----------
    rank, size : int
        This rank and the number of ranks.
    root : int
        The rank that leads the control rounds (the master, or a peer).
    peers : bool
        A job of peers: every rank a worker (worker ``k`` is rank ``k``), no master sends frames.
    pace : TokenBucket, optional
        Paces what leaves the master.
    piece_bytes : int
        Largest piece of a frame a primitive carries.
    reuse_buffers : bool
        Workers receive into one buffer kept across deliveries.
    """

    #: The kinds of control message a worker's :meth:`receive_each` takes.
    _kinds: tuple[int, ...] = (_BCAST, _UNICAST)

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        root: int = 0,
        peers: bool = False,
        pace: TokenBucket | None = None,
        piece_bytes: int = 1 << 26,
        reuse_buffers: bool = True,
    ) -> None:
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        self.peers = bool(peers)
        self.rank, self.size = int(rank), int(size)
        self.K = self.size if self.peers else self.size - 1
        self.is_master = self.rank == self.root and not self.peers
        self.worker = None if self.is_master else self.rank - (self.rank > root and not peers)
        self._pace = pace
        self.piece_bytes = check_int(piece_bytes, "piece_bytes", minimum=1)
        self.reuse_buffers = bool(reuse_buffers)
        self._stats = LinkStats()
        self.control_bytes = 0
        #: The receive buffers kept and grown across receives (:meth:`_arena`): the master's
        #: deliveries' (key False) and, apart from it, the exchange's (key True): a worker may hold
        #: the frames of both at once.
        self._buffers: dict[bool, np.ndarray] = {}
        #: Bytes this worker sent other workers (:meth:`collect`).
        self.exchanged_bytes = 0
        #: How :meth:`collect` sends an offer with rounds: ``"rounds"``, in its rounds, or
        #: ``"alltoall"``, every pair's bytes at once (the link's all-to-all), rounds or not. All
        #: at once by default, as the command line's ``--exchange-schedule``. With their receive
        #: buffer kept across exchanges, the rounds delivered at 300 Mbit/s on namespaced hosts
        #: sharing two loaded cores 1.07 to 1.12 of the busiest payload's byte time at ``K = 4``
        #: against 1.13 to 1.27 at once, 1.16 to 1.25 against 1.16 to 1.28 at ``K = 8``, and
        #: their transition with decoding was the shorter in all twelve rows (docs/benchmarks.md).
        self.exchange_schedule = "alltoall"
        self._offered: dict[int, list[np.ndarray]] = {}
        self._rounds: list[tuple[int, int, int]] | None = None
        #: Paces what this worker sends the others in the exchange (its uplink), if set: every
        #: worker's bucket at one rate, since the pieces of a send (50 ms of that rate) are cut
        #: alike on both sides. The exchange then goes point to point, never in a collective.
        self.exchange_pace: TokenBucket | None = None

    def _exchange_pieces(self, transfers: Transfers) -> Transfers:
        """The exchange's ``transfers`` cut into pieces of 50 ms at :attr:`exchange_pace`'s rate
        (at least 64 KiB), taken in turn, a piece of each transfer after the other; whole if unpaced."""
        pace = self.exchange_pace
        if pace is None:
            return transfers
        step = min(1 << 26, max(1 << 16, int(pace.rate / 20)))
        each = [[(a[lo : lo + step], r) for lo in range(0, a.shape[0], step)] for a, r in transfers]
        return [t for turn in zip_longest(*each) for t in turn if t is not None]

    # ---- the exchange's primitives, over the link's sends and receives between ranks

    def _round_raw(self, send: np.ndarray | None, to: int, recv: np.ndarray | None, frm: int) -> None:
        """Worker: send ``send`` to worker ``to`` and receive worker ``frm``'s bytes into ``recv``,
        both at once, and return when both are done (None: that side has nothing this round)."""
        self._pairwise_raw(
            self._exchange_pieces([(send, self.rank_of(to))] if send is not None and send.shape[0] else []),
            self._exchange_pieces([(recv, self.rank_of(frm))] if recv is not None and recv.shape[0] else []),
            tag=_ROUND_TAG, pace=self.exchange_pace,
        )  # fmt: skip

    def _alltoall_raw(self, send: list[list[np.ndarray]], *, kept: bool = False) -> list[np.ndarray]:
        """Worker, collective among the workers: send worker ``j`` the buffers ``send[j]`` (uint8),
        one after the other; return what each worker sent this one, in worker order, one buffer
        each (with ``kept``, views into the exchange's buffer the link keeps). Here point to point,
        the sizes first, then the bytes (a link may override it with a collective of its own, when
        :attr:`exchange_pace` is not set)."""
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers exchange frames.")
        me = self.worker
        others = [self.rank_of(j) for j in range(self.K) if j != me]
        flat = [np.concatenate(bs) if bs else np.empty(0, np.uint8) for bs in send]  # one message a peer
        sizes = {self.rank_of(j): np.array([flat[j].shape[0]], dtype=np.int64) for j in range(self.K)}
        got = {r: np.zeros(1, dtype=np.int64) for r in others}
        self._pairwise_raw(
            [(sizes[r].view(np.uint8), r) for r in others], [(got[r].view(np.uint8), r) for r in others],
            tag=_ROUND_TAG,
        )  # fmt: skip
        whole = self._exchange_into(sum(int(got[r][0]) for r in others), kept=kept)
        out, lo = {}, 0
        for r in others:
            n = int(got[r][0])
            out[r] = whole[lo : lo + n]
            lo += n
        mine = [(flat[j], self.rank_of(j)) for j in range(self.K) if j != me and flat[j].shape[0]]
        self._pairwise_raw(
            self._exchange_pieces(mine),
            self._exchange_pieces([(out[r], r) for r in others if out[r].shape[0]]),
            tag=_ROUND_TAG, pace=self.exchange_pace,
        )  # fmt: skip
        return [out[self.rank_of(j)] if j != me else np.empty(0, np.uint8) for j in range(self.K)]

    # ---- the workers' exchange

    def offer(
        self,
        worker: int,
        frames: Mapping[int, Sequence[np.ndarray]],
        *,
        rounds: Sequence[tuple[int, int, int]] | None = None,
    ) -> None:
        """Worker: keep ``frames[j]`` for worker ``j`` until :meth:`collect` (nothing is sent yet).

        With ``rounds``, :meth:`collect` sends them in rounds: in round ``r``, ``rounds[r] =
        (to, n, frm)``, this worker sends the next ``n`` frames of ``frames[to]`` to worker ``to``
        and receives worker ``frm``'s (``-1``: none); every worker's rounds are of one schedule
        (:func:`~coded_shuffle.plan.exchange_rounds`), as long as any other's.
        """
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank}: only worker {self.worker} can offer its frames here.")
        self._offered = _offers(frames, self.K, worker)
        self._rounds = None if rounds is None else _rounds(rounds, self._offered, self.K, worker)
        # the receive buffer's pages touched now, before the delivery starts (about as many as this
        # worker sends; grown at the collect if it receives more)
        if self.reuse_buffers:
            self._arena(sum(int(f.shape[0]) for fs in self._offered.values() for f in fs), exchange=True)

    def collect(self, worker: int) -> list[np.ndarray]:
        """Worker, collective among the workers: send the frames offered, return those sent to it.

        The frames come in worker order, each worker's in the order it offered them. Every
        worker calls it once a delivery, with or without an offer (then it sends nothing). They
        are views into the buffer the link keeps for them (:meth:`collect_each`).
        """
        self._collector(worker)
        return [f for _, f in sorted(self._each(), key=lambda sf: sf[0])]  # stable: in offer order

    def collect_each(self, worker: int) -> Iterator[np.ndarray]:
        """Worker: :meth:`collect`, each frame given as soon as its bytes are in: in rounds, a
        round's frames when that round's receive is done, before the next round starts (so that
        they are decoded while it travels); all at once, every frame after the all-to-all, in
        worker order. Each sender's frames come in the order it offered them. Run it to its end:
        the rounds it has not given yet are still to be sent and received. The frames are views
        into a buffer the link keeps and reuses (unless made with ``reuse_buffers=False``): they
        stay valid until the next exchange on this rank."""
        self._collector(worker)
        return (f for _, f in self._each())

    def _collector(self, worker: int) -> None:
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank}: only worker {self.worker} collects here.")

    def _each(self) -> Iterator[tuple[int, np.ndarray]]:
        """:meth:`collect_each`'s frames with their senders, ``(sender, frame)`` each."""
        offered, self._offered = self._offered, {}
        rounds, self._rounds = self._rounds, None
        if rounds is not None and self.exchange_schedule == "rounds":
            yield from self._collect_rounds(offered, rounds)
            return
        frames = [offered.get(j, []) for j in range(self.K)]
        sizes = [np.array([f.shape[0] for f in fs], dtype=np.int64) for fs in frames]
        got_sizes = self._alltoall_raw([[z.view(np.uint8)] for z in sizes])
        got = self._alltoall_raw(frames, kept=True)  # the link packs the frames once, as it sends them
        self.exchanged_bytes += int(sum(z.sum() for z in sizes))
        for j, (z, buf) in enumerate(zip(got_sizes, got, strict=True)):
            n = z.view(np.int64)
            ends = np.cumsum(n)
            yield from ((j, buf[lo:hi]) for lo, hi in zip((ends - n).tolist(), ends.tolist(), strict=True))

    def _collect_rounds(
        self, offered: dict[int, list[np.ndarray]], rounds: list[tuple[int, int, int]]
    ) -> Iterator[tuple[int, np.ndarray]]:
        """:meth:`_each` in ``rounds``: first every pair's frame sizes (one all-to-all of
        small arrays: per transfer its frames' count, then their sizes), then each round's one
        send and one receive, a worker starting the next round when both of its own are done and
        the frames of the round received are given."""
        left = {j: list(fs) for j, fs in offered.items()}
        heads: dict[int, list[int]] = {j: [] for j in range(self.K)}
        sends: list[list[np.ndarray]] = []
        for to, n, _ in rounds:
            part = left[to][:n] if to >= 0 else []
            if to >= 0:
                del left[to][:n]
                heads[to] += [n, *(int(f.shape[0]) for f in part)]
            sends.append(part)
        got = self._alltoall_raw([[np.array(heads[j], dtype=np.int64).view(np.uint8)] for j in range(self.K)])
        told = [iter(g.view(np.int64).tolist()) for g in got]
        sizes: list[list[int]] = []  # the frames received each round
        for _, _, frm in rounds:
            sizes.append([next(told[frm]) for _ in range(next(told[frm]))] if frm >= 0 else [])
        whole = self._arena(sum(map(sum, sizes)), exchange=True)
        steps: list[tuple[np.ndarray | None, int, np.ndarray | None, int]] = []
        lo = 0
        for (to, _, frm), part, zs in zip(rounds, sends, sizes, strict=True):
            data = (part[0] if len(part) == 1 else np.concatenate(part)) if part else None
            steps.append((data, to, whole[lo : lo + sum(zs)] if frm >= 0 else None, frm))
            lo += sum(zs)
            self.exchanged_bytes += 0 if data is None else int(data.shape[0])
        for r in self._rounds_raw(steps):
            _, _, buf, frm = steps[r]
            assert buf is not None
            ends = np.cumsum(sizes[r]).tolist()
            yield from ((frm, buf[e - z : e]) for e, z in zip(ends, sizes[r], strict=True))

    def _rounds_raw(
        self, steps: list[tuple[np.ndarray | None, int, np.ndarray | None, int]]
    ) -> Iterator[int]:
        """Worker: run the rounds ``steps`` (``(send, to, recv, frm)`` each, as :meth:`_round_raw`),
        yielding each round that receives once its bytes are in. One round after the other; a
        link that can keep a send and a receive in flight overrides it."""
        for r, (send, to, recv, frm) in enumerate(steps):
            self._round_raw(send, to, recv, frm)
            if recv is not None:
                yield r

    def allgather(self, value: Any) -> list[Any]:
        """Worker, collective among the workers: every worker's ``value`` (picklable), in worker order."""
        if self.is_master or self.worker is None:
            raise TransportError(f"Rank {self.rank}: only the workers gather their values.")
        mine = _pickled(value)
        got = self._alltoall_raw([[mine] if j != self.worker else [] for j in range(self.K)])
        return [value if j == self.worker else pickle.loads(got[j].tobytes()) for j in range(self.K)]

    def _pieces(self, size: int) -> list[tuple[int, int]]:
        step = self.piece_bytes
        return [(lo, min(size, lo + step)) for lo in range(0, size, step)]

    def _control(self, kind: int, table: np.ndarray, *, third: int | None = None) -> None:
        """Master: broadcast the control message of a delivery: ``kind``, the number of frames,
        the piece size (or ``third``), the frames' table (inline if it fits, else after)."""
        head = np.zeros(_CONTROL_WORDS, dtype=np.int64)
        head[:3] = kind, table.shape[0], self.piece_bytes if third is None else third
        inline = table.shape[0] <= _INLINE_FRAMES
        if inline:
            head[3 : 3 + table.size] = table.ravel()
        self._bcast_raw(head)
        if not inline:
            self._bcast_raw(np.ascontiguousarray(table))
        self.control_bytes += head.nbytes + (0 if inline else table.nbytes)

    def _checked(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Master: the frames of a broadcast, checked, C-contiguous."""
        self._master_only("send")
        if isinstance(frames, (np.ndarray, bytes, bytearray, memoryview)) or not isinstance(frames, Sequence):
            raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
        return [np.ascontiguousarray(_as_frame(f, q)) for q, f in enumerate(frames)]

    def send(self, frames: Sequence[np.ndarray], *, repair: bool = False) -> None:
        """Master: broadcast ``frames`` to every worker (each byte leaves the master once).

        ``repair``: the frames re-send what workers lacked (a link that carries broadcasts on a
        path of its own sends repairs on this reliable one; here every broadcast is).
        """
        checked = self._checked(frames)
        table = np.array([[f.shape[0], -1] for f in checked], dtype=np.int64).reshape(-1, 2)
        self._control(_BCAST, table)
        pace = self.pace
        for f in checked:
            for lo, hi in self._pieces(int(f.shape[0])):
                if pace is not None:
                    pace.consume(hi - lo)
                self._bcast_raw(f[lo:hi])
        self._stats = _counted(self._stats, checked)

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Master: send worker ``k`` only the frames ``frames[k]``, point to point (unicast).

        Every byte still leaves the master once, on the same (paced) link; the workers' pieces
        are taken in turn and sent at once, so that a slow downlink does not hold up the others.
        """
        self._master_only("send")
        order = [(k, np.ascontiguousarray(f)) for k, f in _unicast(frames, self.K)]
        table = np.array([[f.shape[0], k] for k, f in order], dtype=np.int64).reshape(-1, 2)
        self._control(_UNICAST, table)
        each: dict[int, list[np.ndarray]] = {}  # each worker's pieces, in its frames' order
        for k, f in order:
            each.setdefault(k, []).extend(f[lo:hi] for lo, hi in self._pieces(int(f.shape[0])))
        turns: list[tuple[np.ndarray, int]] = []  # the workers' pieces taken in turn
        for i in range(max((len(ps) for ps in each.values()), default=0)):
            turns.extend((ps[i], self.rank_of(k)) for k, ps in each.items() if i < len(ps))
        self._pairwise_raw(turns, [], tag=_TAG, pace=self.pace)
        self._stats = _counted(self._stats, [f for _, f in order])

    def receive(self, worker: int) -> list[np.ndarray]:
        """Worker: return the frames of the master's matching ``send`` or ``send_to``, in order.

        Frames are read-only views into a receive buffer the link keeps and reuses (its pages are
        touched once, not at every delivery): they stay valid until the next ``receive`` on this
        rank; copy them to keep them longer (or make the link with ``reuse_buffers=False``).
        After a ``send_to``, only the frames addressed to this worker are returned.
        """
        return list(self.receive_each(worker))

    def receive_each(self, worker: int) -> Iterator[np.ndarray]:
        """Worker: :meth:`receive`, each frame given as soon as its last byte is in (a broadcast's
        frames one by one; a unicast's once all are). Run it to its end: the frames it has not
        given yet are still on their way to this rank."""
        worker = check_int(worker, "worker", minimum=0)
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank} is not worker {worker}: it cannot receive its frames.")
        kind, third, table = self._head(worker)
        yield from self._frames_of(worker, kind, third, table)

    def _head(self, worker: int) -> tuple[int, int, np.ndarray]:
        """Worker: the master's next control message: its kind, third word and frames' table."""
        head = np.empty(_CONTROL_WORDS, dtype=np.int64)
        self._bcast_raw(head)
        kind, n, third = (int(v) for v in head[:3])
        if kind not in self._kinds or third < 1 or n < 0:
            raise TransportError(
                f"Worker {worker}: unknown control message {head[:3].tolist()} from the master."
            )
        if n <= _INLINE_FRAMES:
            return kind, third, head[3 : 3 + 2 * n].reshape(n, 2)
        table = np.empty((n, 2), dtype=np.int64)
        self._bcast_raw(table)
        return kind, third, table

    def _frames_of(self, worker: int, kind: int, piece: int, table: np.ndarray) -> Iterator[np.ndarray]:
        """Worker: the frames of a delivery of ``kind`` (a broadcast or a unicast), each as it is in."""
        self.piece_bytes = piece
        mine = table if kind == _BCAST else table[table[:, 1] == worker]
        sizes = mine[:, 0].tolist()
        offsets = [0]
        for size in sizes:  # each frame starts on a page
            offsets.append(offsets[-1] + size + (-size % 4096))
        arena = self._arena(offsets[-1])
        out = [arena[o : o + size] for o, size in zip(offsets, sizes, strict=False)]
        if kind == _UNICAST:
            pieces = [buf[lo:hi] for buf in out for lo, hi in self._pieces(int(buf.shape[0]))]
            self._pairwise_raw([], [(p, self.root) for p in pieces], tag=_TAG)
        for buf in out:
            if kind == _BCAST:
                for lo, hi in self._pieces(int(buf.shape[0])):
                    self._bcast_raw(buf[lo:hi])
            buf.flags.writeable = False
            yield buf

    def reserve(self, nbytes: int) -> None:
        """Worker: make the receive buffer hold at least ``nbytes`` now (its pages touched)."""
        nbytes = check_int(nbytes, "nbytes", minimum=0)
        if self.reuse_buffers and not self.is_master:
            self._arena(nbytes)

    def _exchange_into(self, nbytes: int, *, kept: bool) -> np.ndarray:
        """``nbytes`` to receive an exchange into: of the buffer the link keeps for the exchange
        (:meth:`_arena`) with ``kept``, else new."""
        return self._arena(nbytes, exchange=True)[:nbytes] if kept else np.empty(nbytes, dtype=np.uint8)

    def _arena(self, nbytes: int, *, exchange: bool = False) -> np.ndarray:
        """A writeable buffer of at least ``nbytes``, reused (and grown) across receives: the
        master's deliveries', or with ``exchange`` the exchange's (:attr:`_buffers`)."""
        if not self.reuse_buffers:
            return _aligned_empty(nbytes)
        kept = self._buffers.get(exchange)
        if kept is None or kept.shape[0] < nbytes:
            del kept
            self._buffers.pop(exchange, None)  # the smaller one freed before the larger is made
            grown = _aligned_empty(nbytes + (nbytes >> 3))
            grown.fill(0)  # fault the pages in now, not inside the transfer
            self._buffers[exchange] = grown
        return self._buffers[exchange]
