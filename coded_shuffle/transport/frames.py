"""The framing of a delivery over a link between processes, shared by the MPI and torch links.

One call on the master (:meth:`FramedLink.send`, a broadcast, or :meth:`FramedLink.send_to`,
point to point) is matched by one :meth:`FramedLink.receive` on every worker. Ahead of the frames
the master broadcasts a small control message: the kind, the number of frames, the piece size,
then each frame's size and destination (inline for up to ``_INLINE_FRAMES`` frames, else in a
second broadcast), counted apart in ``control_bytes``. Frames travel whole or in pieces of
``piece_bytes``, each paced by the link's bucket if it has one; the workers receive into one
buffer kept and grown across deliveries. A link supplies three primitives: broadcast a buffer
from the master, send one to a worker, and receive a worker's pieces in order.

The workers' exchange (a scheme whose workers send each other frames,
:class:`~coded_shuffle.engine.schemes.ExchangeScheme`) is :meth:`FramedLink.offer`, which only
keeps a worker's frames, then :meth:`FramedLink.collect`, one collective among the workers over a
fourth primitive, an all-to-all of byte buffers. An offer with rounds (each a matching,
:func:`~coded_shuffle.plan.exchange_rounds`) goes in those rounds over a fifth, one send and one
receive of a worker, with no barrier between rounds, when ``exchange_schedule = "rounds"``
(else all at once, the default).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_int
from ..codec import FLAG_REPAIR, frame_flags
from ..codec._common import _aligned_empty
from ..errors import TransportError
from .base import LinkStats, TokenBucket, _as_frame, _counted, _offers, _rounds, _unicast
from .multicast import MulticastReceiver, MulticastSender, Schedule, missing_spans

#: Control message kinds sent ahead of the frames of one ``send`` or ``send_to``.
_BCAST, _UNICAST = 1, 2
#: A broadcast whose frames travel as multicast datagrams (:mod:`.multicast`); the control
#: message's third word is then the delivery's number.
_MCAST = 3
#: A multicast broadcast in scoped groups: an array of the bytes of each frame each worker is to
#: receive (frames x K, ``int64``) follows the frames' table.
_SCOPED = 4

#: Words of the fixed control message; the sizes of up to ``_INLINE_FRAMES`` frames travel in it.
_CONTROL_WORDS = 64

_INLINE_FRAMES = (_CONTROL_WORDS - 3) // 2


class FramedLink:
    """What the links between processes share: the frames' control message, pieces and buffers.

    A subclass sets ``root``, ``K``, ``rank``, ``is_master``, ``worker``, ``piece_bytes``,
    ``pace``, ``reuse_buffers``, and implements :meth:`_bcast_raw`, :meth:`_send_raw` and
    :meth:`_recv_raw` (and, for a multicast data path, :meth:`_gather_obj`, :meth:`_send_objs` and
    :meth:`_recv_obj`).
    """

    root: int
    K: int
    rank: int
    is_master: bool
    worker: int | None
    piece_bytes: int
    reuse_buffers: bool = True
    _stats: LinkStats
    _buffer: np.ndarray | None
    #: Bytes of control messages the master broadcast (frame sizes and destinations).
    control_bytes: int = 0
    #: Bytes this worker sent other workers (:meth:`collect`).
    exchanged_bytes: int = 0

    # ---- the primitives of a link

    def _bcast_raw(self, arr: np.ndarray) -> None:  # pragma: no cover - abstract
        """Broadcast the C-contiguous ``arr`` from the master (written in place on the workers)."""
        raise NotImplementedError

    def _send_raw(self, arr: np.ndarray, dest: int) -> None:  # pragma: no cover - abstract
        """Master: send the C-contiguous ``arr`` to rank ``dest``."""
        raise NotImplementedError

    def _send_all_raw(self, pieces: list[tuple[np.ndarray, int]], pace: TokenBucket | None) -> None:
        """Master: send each ``(piece, rank)``, waiting on ``pace`` before each; in order, one
        after the other (a link that can keep several sends in flight overrides it, so that each
        destination's pieces go at once, as a switch carries them)."""
        for arr, dest in pieces:
            if pace is not None:
                pace.consume(arr.shape[0])
            self._send_raw(arr, dest)

    def _recv_raw(self, bufs: list[np.ndarray]) -> None:  # pragma: no cover - abstract
        """Worker: receive from the master, in order, into each of ``bufs``."""
        raise NotImplementedError

    def _round_raw(self, send: np.ndarray | None, to: int, recv: np.ndarray | None, frm: int) -> None:
        """Worker: send ``send`` to worker ``to`` and receive worker ``frm``'s bytes into ``recv``,
        both at once, and return when both are done (None: that side has nothing this round)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _alltoall_raw(self, send: list[list[np.ndarray]]) -> list[np.ndarray]:  # pragma: no cover - abstract
        """Worker, collective among the workers: send worker ``j`` the buffers ``send[j]`` (uint8),
        one after the other; return what each worker sent this one, in worker order, one buffer
        each."""
        raise NotImplementedError

    def _gather_obj(self, value: Any) -> list[Any] | None:  # pragma: no cover - abstract
        """Collective: every rank's small picklable ``value``, by rank, on the master (None elsewhere)."""
        raise NotImplementedError

    def _send_objs(self, sends: list[tuple[Any, int]]) -> None:  # pragma: no cover - abstract
        """Master: send each ``(value, rank)`` (picklable), all at once, and return when sent."""
        raise NotImplementedError

    def _recv_obj(self) -> Any:  # pragma: no cover - abstract
        """Worker: the next value the master sent it with :meth:`_send_objs`."""
        raise NotImplementedError

    # ---- shared

    @property
    def pace(self) -> TokenBucket | None:
        """The bucket pacing the master's sends, if any."""
        return None

    #: A job of peers: every rank a worker (worker ``k`` is rank ``k``), rank ``root`` also leading
    #: the protocol's control rounds; no master sends frames.
    peers: bool = False

    def rank_of(self, worker: int) -> int:
        """Return the rank of ``worker``."""
        return worker if self.peers else worker + (worker >= self.root)

    @property
    def is_leader(self) -> bool:
        """Whether this rank leads the control rounds: the master, or rank ``root`` among peers."""
        return self.rank == self.root

    def _lead_only(self, what: str) -> None:
        if not self.is_leader:
            raise TransportError(f"Rank {self.rank} does not lead: only rank {self.root} can {what}.")

    def _posters(self) -> list[int]:
        """The workers that post to the leader: all of them, but the leader's own among peers."""
        return [k for k in range(self.K) if k != self.worker]

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far (zero on workers)."""
        return self._stats

    def _master_only(self, what: str) -> None:
        if not self.is_master:
            raise TransportError(
                f"Rank {self.rank} is a worker: only the master (rank {self.root}) can {what}."
            )

    def _control(self, kind: int, table: np.ndarray, *, third: int | None = None) -> None:
        head = np.zeros(_CONTROL_WORDS, dtype=np.int64)
        head[:3] = kind, table.shape[0], self.piece_bytes if third is None else third
        inline = table.shape[0] <= _INLINE_FRAMES
        if inline:
            head[3 : 3 + table.size] = table.ravel()
        self._bcast_raw(head)
        if not inline:
            self._bcast_raw(np.ascontiguousarray(table))
        self.control_bytes += head.nbytes + (0 if inline else table.nbytes)

    #: How :meth:`collect` sends an offer with rounds: ``"rounds"``, in its rounds, or
    #: ``"alltoall"``, every pair's bytes at once (the link's all-to-all), rounds or not. All at
    #: once by default: on namespaced hosts sharing two loaded cores the rounds measured 1 to 18
    #: points of the busiest port's byte time slower (docs/benchmarks.md).
    exchange_schedule: str = "alltoall"

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

    def collect(self, worker: int) -> list[np.ndarray]:
        """Worker, collective among the workers: send the frames offered, return those sent to it.

        The frames come in worker order, each worker's in the order it offered them. Every
        worker calls it once a delivery, with or without an offer (then it sends nothing).
        """
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank}: only worker {self.worker} collects here.")
        offered, self._offered = getattr(self, "_offered", {}), {}
        rounds, self._rounds = getattr(self, "_rounds", None), None
        if rounds is not None and self.exchange_schedule == "rounds":
            return self._collect_rounds(offered, rounds)
        frames = [offered.get(j, []) for j in range(self.K)]
        sizes = [np.array([f.shape[0] for f in fs], dtype=np.int64) for fs in frames]
        got_sizes = self._alltoall_raw([[z.view(np.uint8)] for z in sizes])
        got = self._alltoall_raw(frames)  # the link packs the frames once, as it sends them
        self.exchanged_bytes += int(sum(z.sum() for z in sizes))
        out: list[np.ndarray] = []
        for z, buf in zip(got_sizes, got, strict=True):
            n = z.view(np.int64)
            ends = np.cumsum(n)
            out.extend(buf[lo:hi] for lo, hi in zip((ends - n).tolist(), ends.tolist(), strict=True))
        return out

    def _collect_rounds(
        self, offered: dict[int, list[np.ndarray]], rounds: list[tuple[int, int, int]]
    ) -> list[np.ndarray]:
        """:meth:`collect` in ``rounds``: first every pair's frame sizes (one all-to-all of small
        arrays: per transfer its frames' count, then their sizes), then each round's one send and
        one receive, a worker starting the next round when both of its own are done."""
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
        whole = np.empty(sum(map(sum, sizes)), dtype=np.uint8)
        steps: list[tuple[np.ndarray | None, int, np.ndarray | None, int]] = []
        lo = 0
        for (to, _, frm), part, zs in zip(rounds, sends, sizes, strict=True):
            data = (part[0] if len(part) == 1 else np.concatenate(part)) if part else None
            steps.append((data, to, whole[lo : lo + sum(zs)] if frm >= 0 else None, frm))
            lo += sum(zs)
            self.exchanged_bytes += 0 if data is None else int(data.shape[0])
        each: dict[int, list[np.ndarray]] = {}
        for r in self._rounds_raw(steps):
            _, _, buf, frm = steps[r]
            assert buf is not None
            ends = np.cumsum(sizes[r]).tolist()
            each.setdefault(frm, []).extend(buf[e - z : e] for e, z in zip(ends, sizes[r], strict=True))
        return [f for j in sorted(each) for f in each[j]]

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
        import pickle

        if self.is_master or self.worker is None:
            raise TransportError(f"Rank {self.rank}: only the workers gather their values.")
        mine = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
        got = self._alltoall_raw([[mine] if j != self.worker else [] for j in range(self.K)])
        return [value if j == self.worker else pickle.loads(got[j].tobytes()) for j in range(self.K)]

    def _pieces(self, size: int) -> list[tuple[int, int]]:
        step = self.piece_bytes
        return [(lo, min(size, lo + step)) for lo in range(0, size, step)]

    #: The multicast data path of the master's broadcasts, if the link has one (set by
    #: :meth:`coded_shuffle.transport.MPITransport.open_multicast`).
    _mc_send: MulticastSender | None = None
    _mc_recv: MulticastReceiver | None = None
    _deliveries: int = 0
    #: Master: multicast deliveries of which no worker received a byte (all came by the repairs).
    multicast_lost_all: int = 0
    #: Worker: bytes of lost datagrams received again over the reliable link.
    resent_bytes: int = 0

    def send(self, frames: Sequence[np.ndarray]) -> None:
        """Master: broadcast ``frames`` to every worker (each byte leaves the master once).

        On a link with a multicast data path the frames go as datagrams to the group, except
        repair frames (``FLAG_REPAIR``), which take the reliable path so that repairs end. After
        the datagrams, the master broadcasts the bytes of each frame each worker is to receive
        (the end of the delivery), gathers what each lacks (the byte spans of its incomplete
        frames) and sends each the bytes of its lost datagrams alone, over the link
        (:attr:`stats` ``.resent``): the frames a worker returns are whole.
        """
        self._master_only("send")
        if isinstance(frames, (np.ndarray, bytes, bytearray, memoryview)) or not isinstance(frames, Sequence):
            raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
        checked = [np.ascontiguousarray(_as_frame(f, q)) for q, f in enumerate(frames)]
        table = np.array([[f.shape[0], -1] for f in checked], dtype=np.int64).reshape(-1, 2)
        if self._mc_send is not None and not any(frame_flags(f) & FLAG_REPAIR for f in checked):
            self._deliveries += 1
            plan = self._mc_send.schedule(checked)
            scoped = self._mc_send.K is not None
            self._control(_SCOPED if scoped else _MCAST, table, third=self._deliveries)
            self._mc_send.send(checked, self._deliveries, plan)
            # after the datagrams, the end of the delivery: the bytes of each frame each worker is
            # to receive (frames x K scoped, else frames x 1), read once they are all sent
            self._bcast_raw(plan.expected)
            self.control_bytes += plan.expected.nbytes
            resent = self._resend_lost(checked, plan)
            s = _counted(self._stats, checked)
            self._stats = LinkStats(s.frames, s.symbols, s.bytes + resent, s.resent + resent)
            return
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
        are taken in turn, and a link that keeps several sends in flight (MPI) sends them at once,
        so that a slow downlink does not hold up the others.
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
        self._send_all_raw(turns, self.pace)
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
        frames one by one; a unicast's or a multicast's once all are). Run it to its end: the
        frames it has not given yet are still on their way to this rank."""
        worker = check_int(worker, "worker", minimum=0)
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank} is not worker {worker}: it cannot receive its frames.")
        head = np.empty(_CONTROL_WORDS, dtype=np.int64)
        self._bcast_raw(head)
        kind, n, piece = (int(v) for v in head[:3])
        known = (_BCAST, _UNICAST) if self._mc_recv is None else (_BCAST, _UNICAST, _MCAST, _SCOPED)
        if kind not in known or piece < 1 or n < 0:
            raise TransportError(
                f"Worker {worker}: unknown control message {head[:3].tolist()} from the master."
            )
        if n <= _INLINE_FRAMES:
            table = head[3 : 3 + 2 * n].reshape(n, 2)
        else:
            table = np.empty((n, 2), dtype=np.int64)
            self._bcast_raw(table)
        if kind in (_MCAST, _SCOPED):
            assert self._mc_recv is not None
            yield from self._receive_multicast(worker, piece, table[:, 0].tolist(), kind == _SCOPED)
            return
        self.piece_bytes = piece
        mine = table if kind == _BCAST else table[table[:, 1] == worker]
        sizes = mine[:, 0].tolist()
        offsets = [0]
        for size in sizes:  # each frame starts on a page
            offsets.append(offsets[-1] + size + (-size % 4096))
        arena = self._arena(offsets[-1])
        out = [arena[o : o + size] for o, size in zip(offsets, sizes, strict=False)]
        if kind == _UNICAST:
            self._recv_raw([buf[lo:hi] for buf in out for lo, hi in self._pieces(int(buf.shape[0]))])
        for buf in out:
            if kind == _BCAST:
                for lo, hi in self._pieces(int(buf.shape[0])):
                    self._bcast_raw(buf[lo:hi])
            buf.flags.writeable = False
            yield buf

    def _resend_lost(self, frames: list[np.ndarray], plan: Schedule) -> int:
        """Master, after a multicast delivery: gather what each worker lacks of it (None, or the
        spans received of each frame it could not complete) and send each that lacks some, in
        one message, the spans it lacks (:func:`~coded_shuffle.transport.multicast.missing_spans`)
        and their bytes, paced as the link is; return the bytes of the spans sent. A worker that
        lacks nothing waits for nothing."""
        assert self._mc_send is not None
        posts = self._gather_obj(None)
        assert posts is not None
        K = self._mc_send.K
        sends: list[tuple[Any, int]] = []
        resent, lost_all = 0, True
        for k in range(self.K):
            rank = self.rank_of(k)
            got = posts[rank]
            rows = missing_spans(plan, k, got or {}, K=K)
            lost = int((rows[:, 2] - rows[:, 1]).sum())
            wanted = int(plan.expected[:, k if K is not None else 0].sum())
            lost_all &= wanted > 0 and lost == wanted
            if got is None:
                continue
            data = np.concatenate([frames[q][lo:hi] for q, lo, hi in rows.tolist()] or [rows[:0, 0]])
            if self.pace is not None:
                self.pace.consume(int(rows.nbytes) + lost)
            sends.append(((rows, data.view(np.uint8)), rank))
            resent += lost
        self._send_objs(sends)
        self.multicast_lost_all += bool(lost_all and self.K)
        return resent

    def _receive_multicast(
        self, worker: int, delivery: int, sizes: list[int], scoped: bool
    ) -> Iterator[np.ndarray]:
        """Worker: a multicast delivery's frames, once the master has sent them all (the
        end-of-delivery message), what was lost of them sent again over the reliable link."""
        assert self._mc_recv is not None
        every = np.empty((len(sizes), self.K if scoped else 1), dtype=np.int64)
        self._mc_recv.reserve(sum(sizes))  # the socket holds the delivery, were it read late
        self._bcast_raw(every)  # the end of the delivery
        expected = every[:, worker if scoped else 0].tolist()
        got, lacking = self._mc_recv.gather(delivery, sizes, expected)
        self._gather_obj(lacking or None)
        if lacking:  # the spans it lacks and their bytes
            rows, data = self._recv_obj()
            at = 0
            for q, lo, hi in rows.tolist():
                got[q][lo:hi] = data[at : at + hi - lo]
                at += hi - lo
            self.resent_bytes += int(data.shape[0])
        for buf in got:
            buf.flags.writeable = False
        yield from got

    def reserve(self, nbytes: int) -> None:
        """Worker: make the receive buffer hold at least ``nbytes`` now (its pages touched)."""
        nbytes = check_int(nbytes, "nbytes", minimum=0)
        if self.reuse_buffers and not self.is_master:
            self._arena(nbytes)

    def _arena(self, nbytes: int) -> np.ndarray:
        """A writeable buffer of at least ``nbytes``, reused (and grown) across receives."""
        if not self.reuse_buffers:
            return _aligned_empty(nbytes)
        if self._buffer is None or self._buffer.shape[0] < nbytes:
            self._buffer = None
            self._buffer = _aligned_empty(nbytes + (nbytes >> 3))
            self._buffer.fill(0)  # fault the pages in now, not inside the transfer
        return self._buffer
