"""The master's broadcast as UDP multicast datagrams: one send reaches every worker.

A network whose switch (or bridge) replicates a multicast datagram carries the master's coded
symbols to every worker for the price of one transmission, where ``MPI_Bcast`` is a chain of
unicasts relayed by the workers' uplinks. :class:`MulticastSender` cuts each frame into datagrams
of at most ``datagram_bytes`` (by default 1472: one Ethernet frame of 1500 bytes, never
fragmented), each with a header of :data:`DATAGRAM_HEADER_BYTES`::

    magic "CSMD" | delivery (u32) | frame (u32) | offset (u32) | frame bytes (u32)

(little-endian), paced by a :class:`~coded_shuffle.transport.base.TokenBucket` when given.
:class:`MulticastReceiver` joins the group and, on a thread of its own (never the decoding
one), reads its socket, which is sized to hold a whole delivery unread (:meth:`~MulticastReceiver.reserve`),
and copies each datagram's bytes into its frame. UDP may lose or reorder datagrams. Once the
sender has sent the delivery's last datagram it says so over the process link, which is reliable
(the bytes of each frame each worker is to receive); :meth:`MulticastReceiver.gather` then
returns the frames at once if they are whole, or else as soon as the thread has read all that
the socket holds and no datagram more came for ``settle`` seconds, with the byte spans each
incomplete frame received. :func:`missing_spans` turns them, on the sender's side, into what the
worker lacks, datagram by datagram, which the link sends it again over the reliable path
(:meth:`~coded_shuffle.transport.MulticastLink.send`): a datagram lost costs its own bytes
again, not its frame, and no timer runs while the datagrams come (``idle`` only bounds the wait
after the end of the delivery). The frames are then checked by their checksums as ever.

Groups are IPv4 multicast addresses; :func:`parse_group` takes ``GROUP:PORT``.

**Scoped groups.** Given the number of workers ``K``, the sender sends each span of a frame only
to the workers that read it (:func:`~coded_shuffle.codec.frame_scopes`): a group per pair of
workers for the XOR symbols of the pair, a group per worker for the points it alone receives, and
the group ``GROUP`` itself, which every worker joins, for the framing and every symbol read by
more than two workers (:func:`scope_groups`: ``GROUP + 1 ..`` the pairs, then the workers; beyond
64 workers a group per pair of blocks of workers instead, :mod:`._scopes`). On a
switch that forwards a group only to its members (IGMP snooping), a worker's downlink then
carries little more than what it decodes. The datagrams of the groups are interleaved in
proportion to their bytes, so that each downlink's share of the delivery arrives at an even
rate, and :meth:`MulticastSender.schedule` says how many bytes of each frame each worker is to
receive (the control message carries it; a worker's frame is complete when those have come).
With ``down`` (a worker's downlink rate), the sender also keeps the busiest downlink at that
rate: it paces the delivery at ``down`` times its bytes over the busiest worker's (where the
switch snoops; else at ``down``, every downlink carrying every group).
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from .._checks import check_int
from ..codec import frame_scopes
from ..errors import DecodeError, TransportError
from ._scopes import (
    _group_index,
    _group_members,
    _racks,
    _worker_groups,
    max_memberships,
    parse_group,
    scope_groups,
)
from .base import TokenBucket

__all__ = [
    "MulticastSender", "MulticastReceiver", "Schedule", "parse_group", "scope_groups", "max_memberships",
    "missing_spans", "rmem_max", "DATAGRAM_HEADER_BYTES",
]  # fmt: skip

_HEADER = struct.Struct("<4sIIII")
#: Bytes of the header of every datagram.
DATAGRAM_HEADER_BYTES = _HEADER.size
_MAGIC = b"CSMD"
#: The largest UDP payload in one IPv4 packet of 1500 bytes (20 of IP, 8 of UDP).
DEFAULT_DATAGRAM_BYTES = 1472
_MAX_DATAGRAM = 65507
#: Linux's IP_MULTICAST_ALL (0: a socket bound to any address gets only the groups it joined).
_IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL", 49)


class Schedule(NamedTuple):
    """The datagrams of one delivery, in the order they leave: frame, first byte, end and group of
    each; and ``expected[q, k]``, the bytes of frame ``q`` that worker ``k`` is to receive."""

    frame: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    group: np.ndarray
    expected: np.ndarray


def _check_datagram(datagram_bytes: int) -> int:
    n = check_int(datagram_bytes, "datagram_bytes", minimum=DATAGRAM_HEADER_BYTES + 1)
    if n > _MAX_DATAGRAM:
        raise ValueError(f"Argument 'datagram_bytes' must be at most {_MAX_DATAGRAM}, not {n}.")
    return n


class MulticastSender:
    """The master's side: frames out as datagrams to ``group:port``.

    Parameters
    ----------
    group, port : str, int
        The IPv4 multicast group and UDP port (:func:`parse_group`).
    interface : str
        The address of the interface to send from (default: the route's, ``0.0.0.0``).
    datagram_bytes : int
        UDP payload a datagram, header included (default 1472).
    pace : TokenBucket, optional
        Waited on before each datagram: the link's rate (without it, as fast as the host sends).
    ttl : int
        Hops a datagram may cross (default 1: the local network alone).
    K : int, optional
        The workers: send each span of a frame to its readers' scoped group (module docstring);
        without it, every datagram goes to ``group``.
    down : float, optional
        A worker's downlink in bytes a second: the busiest downlink of a delivery is kept at it
        (with ``snooping``, a downlink carries only its groups' datagrams; else all of them).
    snooping : bool
        The switch forwards each group only to its members (IGMP snooping).
    racks : sequence of int, optional
        Hosts a rack (in the order of the workers): beyond 64 workers the scoped groups' blocks
        then lie inside them (:func:`~._scopes.scope_blocks`), as the receivers' must.
    """

    def __init__(
        self,
        group: str,
        port: int,
        *,
        interface: str = "0.0.0.0",
        datagram_bytes: int = DEFAULT_DATAGRAM_BYTES,
        pace: TokenBucket | None = None,
        ttl: int = 1,
        K: int | None = None,
        down: float | None = None,
        snooping: bool = False,
        racks: Sequence[int] | None = None,
    ) -> None:
        self.group, self.port = parse_group(f"{group}:{port}")
        self.datagram_bytes = _check_datagram(datagram_bytes)
        #: The switch forwards a group to its members alone: a downlink carries its groups' bytes.
        self.snooping = bool(snooping)
        #: The workers of the scoped groups (None: every datagram to ``group``).
        self.K = None if K is None else check_int(K, "K", minimum=1)
        #: The racks the scoped groups' blocks follow (None: blocks of consecutive workers).
        self.racks = None if self.K is None or racks is None else _racks(self.K, racks)
        self._groups = [self.group] if self.K is None else scope_groups(self.group, self.K, self.racks)
        if down is not None and not 0 < down < float("inf"):
            raise ValueError(f"Argument 'down' must be a positive number of bytes a second, not {down!r}.")
        self.down = down
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        self.pace = pace
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, check_int(ttl, "ttl", minimum=1))
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        self._sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
        #: Datagrams and bytes (headers included) sent so far.
        self.datagrams = 0
        self.bytes = 0

    def schedule(self, frames: Sequence[np.ndarray]) -> Schedule:
        """The datagrams of ``frames`` (1-D ``uint8``): each frame cut into spans of one group of
        readers (every worker's without :attr:`K`, or for a buffer that is not a frame), each span
        into datagrams; with more than one group, interleaved in proportion to each group's
        datagrams (the ``i``-th of ``n`` leaves at ``(i + 1/2) / n`` of the delivery)."""
        step = self.datagram_bytes - DATAGRAM_HEADER_BYTES
        K = self.K or 1
        parts: list[tuple[int, int, int, int]] = []  # frame, lo, hi, group
        expected = np.zeros((len(frames), K), dtype=np.int64)
        readers = _group_members(K, self.racks)
        for q, frame in enumerate(frames):
            size = int(frame.shape[0])
            spans: list[tuple[int, int, int]] = [(0, size, 0)]
            if self.K is not None and size:
                try:
                    bounds, receivers = frame_scopes(frame)
                    ends = zip(bounds[:-1].tolist(), bounds[1:].tolist(), receivers.tolist(), strict=True)
                    spans = [(lo, hi, _group_index(m, K, self.racks)) for lo, hi, m in ends]
                except DecodeError:
                    pass  # not a frame: every worker's, whole (its readers reject it)
            for lo, hi, g in _joined(spans):
                expected[q, readers[g]] += hi - lo
                parts.extend((q, a, min(hi, a + step), g) for a in range(lo, max(hi, lo + 1), step))
        arr = np.array(parts, dtype=np.int64).reshape(-1, 4)
        if arr.shape[0] and int(arr[:, 3].max()) > 0:
            grp = arr[:, 3]
            order = np.argsort(grp, kind="stable")
            counts = np.bincount(grp)
            rank = np.empty(grp.shape[0], dtype=np.float64)
            rank[order] = np.arange(grp.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
            arr = arr[np.argsort((rank + 0.5) / counts[grp], kind="stable")]
        return Schedule(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], expected)

    def send(self, frames: Sequence[np.ndarray], delivery: int, schedule: Schedule | None = None) -> None:
        """Send ``frames`` (1-D ``uint8``) as delivery number ``delivery``, in the order of
        ``schedule`` (:meth:`schedule`'s, made here if None); raise
        :class:`~coded_shuffle.errors.TransportError` in one line when the host cannot send to
        the group (no route for it)."""
        plan = self.schedule(frames) if schedule is None else schedule
        views = [memoryview(np.ascontiguousarray(f).data).cast("B") for f in frames]
        sizes = [len(v) for v in views]
        down = None
        total = int((plan.hi - plan.lo).sum())
        if self.down is not None and total:  # the busiest downlink: all, or its groups' if snooped
            busiest = int(plan.expected.sum(axis=0).max()) if self.snooping else total
            down = TokenBucket(self.down * total / max(busiest, 1))
        head = bytearray(DATAGRAM_HEADER_BYTES)
        for q, lo, hi, g in zip(plan.frame.tolist(), plan.lo.tolist(), plan.hi.tolist(), plan.group.tolist(),
                                strict=True):  # fmt: skip
            chunk = views[q][lo:hi]
            _HEADER.pack_into(head, 0, _MAGIC, delivery & 0xFFFFFFFF, q, lo, sizes[q])
            for bucket in (self.pace, down):
                if bucket is not None:
                    bucket.consume(DATAGRAM_HEADER_BYTES + hi - lo)
            try:
                self._sock.sendmsg([head, chunk], [], 0, (self._groups[g], self.port))
            except OSError as exc:
                raise TransportError(
                    f"multicast to {self._groups[g]}:{self.port} failed ({exc.strerror or exc}): "
                    "the host has no route for the group"
                ) from None
            self.datagrams += 1
            self.bytes += DATAGRAM_HEADER_BYTES + hi - lo

    def close(self) -> None:
        self._sock.close()


def _joined(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``spans`` with neighbours of one group joined."""
    out: list[tuple[int, int, int]] = []
    for lo, hi, g in spans:
        if out and out[-1][2] == g:
            out[-1] = (out[-1][0], hi, g)
        else:
            out.append((lo, hi, g))
    return out


def missing_spans(
    plan: Schedule, worker: int, received: Mapping[int, np.ndarray], *, K: int | None = None,
    racks: Sequence[int] | None = None,
) -> np.ndarray:  # fmt: skip
    """What worker ``worker`` lacks of a delivery sent by ``plan``: ``(frame, lo, hi)`` rows
    (``int64``, by frame and byte, neighbours joined), the datagrams of its groups (all of them
    without scoped groups, ``K`` None) in each frame ``q`` of ``received`` whose bytes the spans
    ``received[q]`` (``(lo, hi)`` rows, :meth:`MulticastReceiver.gather`) do not cover.

    Examples
    --------
    >>> import numpy as np
    >>> tx = MulticastSender("239.1.2.3", 5000, datagram_bytes=120)  # 100 bytes a datagram
    >>> plan = tx.schedule([np.zeros(250, np.uint8), np.zeros(90, np.uint8)])
    >>> missing_spans(plan, 0, {0: np.array([[100, 200]])}).tolist()
    [[0, 0, 100], [0, 200, 250]]
    >>> tx.close()
    """
    worker = check_int(worker, "worker", minimum=0)
    mine = np.ones(plan.frame.shape[0], dtype=bool)
    if K is not None:
        K = check_int(K, "K", minimum=worker + 1)
        mine = np.isin(plan.group, _worker_groups(worker, K, None if racks is None else tuple(racks)))
    frames = sorted(int(q) for q in received)
    if not frames:
        return np.empty((0, 3), dtype=np.int64)
    # a byte of frame q at offset x is the key q * 2**32 + x: one sorted line of every frame's spans
    got = [np.asarray(received[q], dtype=np.int64).reshape(-1, 2) + (q << 32) for q in frames]
    have = np.concatenate(got)
    have = have[np.argsort(have[:, 0], kind="stable")]
    sel = mine & np.isin(plan.frame, frames) & (plan.hi > plan.lo)
    lo = (plan.frame[sel] << 32) + plan.lo[sel]
    hi = (plan.frame[sel] << 32) + plan.hi[sel]
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    i = np.searchsorted(have[:, 0], lo, side="right") - 1
    covered = (i >= 0) & (hi <= have[np.maximum(i, 0), 1]) if have.shape[0] else np.zeros(lo.shape, bool)
    lo, hi = lo[~covered], hi[~covered]
    first = np.ones(lo.shape[0], dtype=bool)  # a span that does not go on from the one before
    first[1:] = lo[1:] != hi[:-1]
    last = np.ones(lo.shape[0], dtype=bool)
    last[:-1] = first[1:]
    a, b = lo[first], hi[last]
    return np.stack([a >> 32, a & 0xFFFFFFFF, b - (a >> 32 << 32)], axis=1).astype(np.int64).reshape(-1, 3)


class _Frame:
    """A frame being gathered: its buffer, the span ``lo -> hi`` of each datagram in, their bytes."""

    __slots__ = ("data", "spans", "got")

    def __init__(self, size: int) -> None:
        self.data = np.empty(size, dtype=np.uint8)
        self.spans: dict[int, int] = {}
        self.got = 0

    def received(self) -> np.ndarray:
        """The byte spans in, neighbours joined: ``(lo, hi)`` rows, ``int64``, in order."""
        out: list[list[int]] = []
        for lo, hi in sorted(self.spans.items()):
            if out and out[-1][1] == lo:
                out[-1][1] = hi
            else:
                out.append([lo, hi])
        return np.array(out, dtype=np.int64).reshape(-1, 2)


#: The most bytes a receiver asks its socket to hold (the kernel's own limit is lower without
#: CAP_NET_ADMIN: ``net.core.rmem_max``).
_MAX_RCVBUF = 1 << 30
#: Linux's SO_RCVBUFFORCE: a receive buffer past ``net.core.rmem_max``, with CAP_NET_ADMIN.
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def rmem_max() -> int | None:
    """The largest receive buffer a socket may ask for without CAP_NET_ADMIN on this host
    (``net.core.rmem_max``; None where it cannot be read). The kernel doubles what is asked, for
    its bookkeeping: a 1472-byte datagram takes about 2300 bytes of it."""
    try:
        with open("/proc/sys/net/core/rmem_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _join(sock: socket.socket, groups: list[str], interface: str) -> None:
    """Join ``sock`` to ``groups`` (the first every worker's) on ``interface``; a TransportError
    that says why where the host refuses one (the socket closed)."""
    for g in groups:
        try:
            sock.setsockopt(
                socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(g) + socket.inet_aton(interface)
            )
        except OSError as exc:
            sock.close()
            why = (
                "the host has no route for it"
                if g == groups[0]
                else f"{len(groups)} groups a socket; net.ipv4.igmp_max_memberships is {max_memberships()}"
            )
            raise TransportError(
                f"cannot join the multicast group {g} ({exc.strerror or exc}): {why}"
            ) from None


class MulticastReceiver:
    """A worker's side: joins ``group:port`` and gathers each delivery's frames from datagrams.

    A thread of its own reads the socket (the decoding thread never does) and copies each
    datagram's bytes into its frame. :meth:`gather` is called once the sender has sent the whole
    delivery (the process link's end-of-delivery message): it returns at once if every frame is
    whole, else when the thread has read all that the socket holds and no datagram more came for
    ``settle`` seconds, and says which spans of which frames are missing (to be sent again over
    the reliable link). No timer runs while datagrams come; ``idle`` only bounds the wait after
    the end of the delivery.

    Parameters
    ----------
    group, port : str, int
        As the sender's.
    interface : str
        The address of the interface to join on (default ``0.0.0.0``: the route's).
    idle : float
        Seconds at most that :meth:`gather` waits, after the end of the delivery, for datagrams
        still missing (default 1).
    settle : float
        Seconds of quiet, once the socket is empty, before what is still missing is lost
        (default 0: the end of the delivery comes after its datagrams on a path that keeps
        their order, and a datagram it overtakes is only sent again; a sleep, on loaded cores,
        costs milliseconds).
    datagram_bytes : int
        The largest datagram to read (default: the largest UDP payload).
    drop : float
        Drop this share of the datagrams on arrival, at random (tests of the repairs only).
    worker, K, racks : int, int, sequence of int, optional
        This worker, and the workers and racks of the scoped groups, as the sender's.
    """

    def __init__(
        self,
        group: str,
        port: int,
        *,
        interface: str = "0.0.0.0",
        idle: float = 1.0,
        settle: float = 0.0,
        datagram_bytes: int = _MAX_DATAGRAM,
        drop: float = 0.0,
        seed: int = 0,
        worker: int | None = None,
        K: int | None = None,
        racks: Sequence[int] | None = None,
    ) -> None:
        self.group, self.port = parse_group(f"{group}:{port}")
        if (worker is None) != (K is None):
            raise ValueError(
                "Arguments 'worker' and 'K' must be given together (scoped groups) or not at all."
            )
        if K is not None:
            K = check_int(K, "K", minimum=1)
            worker = check_int(worker, "worker", minimum=0, maximum=K - 1)
            on = None if racks is None else _racks(K, racks)
            every = scope_groups(self.group, K, on)
            #: The groups this receiver joined: every worker's, and with scoping its pairs' and its own.
            self.groups = [every[g] for g in _worker_groups(worker, K, on)]
        else:
            self.groups = [self.group]
        if not 0 < idle < 1e6:
            raise ValueError(f"Argument 'idle' must be a positive number of seconds, not {idle!r}.")
        if not 0 <= settle < 1e6:
            raise ValueError(f"Argument 'settle' must be a number of seconds from 0, not {settle!r}.")
        if not 0 <= drop <= 1:
            raise ValueError(f"Argument 'drop' must be a share from 0 to 1, not {drop!r}.")
        self.idle, self.settle = float(idle), float(settle)
        self._drop, self._rng = float(drop), np.random.default_rng(seed)
        self._size = _check_datagram(datagram_bytes)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock = sock
        #: The bytes the kernel lets the socket hold (what it reports: twice what was asked).
        self.receive_buffer = 0
        self.reserve(1 << 25)
        if len(self.groups) == 1:
            sock.bind((self.group, self.port))
        else:  # any of its groups, and only those the socket joined (not the host's other sockets')
            sock.bind(("0.0.0.0", self.port))
            sock.setsockopt(socket.IPPROTO_IP, _IP_MULTICAST_ALL, 0)
        _join(sock, self.groups, interface)
        sock.setblocking(False)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._frames: dict[tuple[int, int], _Frame] = {}
        self._cond = threading.Condition()
        #: Datagrams received (dropped ones included), those dropped on purpose and their bytes.
        self.datagrams = 0
        self.dropped = 0
        self.dropped_bytes = 0
        self._drains = 0  # times the thread found the socket empty
        self._busy = True  # the thread may hold a datagram read and not yet in its frame
        self._settling = False  # a waiter wants to hear of each datagram
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="coded_shuffle-multicast", daemon=True)
        self._thread.start()

    def reserve(self, nbytes: int) -> int:
        """Let the socket hold at least ``nbytes`` of datagrams (headers included) unread, as far
        as the kernel allows (past ``net.core.rmem_max`` only with CAP_NET_ADMIN); return the
        bytes it lets the socket hold (:attr:`receive_buffer`). It only grows."""
        want = min(_MAX_RCVBUF, 2 * check_int(nbytes, "nbytes", minimum=0))  # a datagram's bookkeeping
        if 2 * want > self.receive_buffer:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, want)
            except OSError:  # no CAP_NET_ADMIN: as far as net.core.rmem_max
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, want)
            self.receive_buffer = int(self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        return self.receive_buffer

    def _run(self) -> None:
        buf = bytearray(self._size)
        view = memoryview(buf)
        sock, cond = self._sock, self._cond
        while not self._stopping:
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:  # the socket is empty: say so, and sleep until a datagram or a wake
                with cond:
                    self._drains += 1
                    self._busy = False
                    cond.notify_all()
                try:
                    select.select([sock.fileno(), self._wake_r], [], [])
                    self._busy = True
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
                except (OSError, ValueError):
                    return
                continue
            except OSError:
                return
            if n < DATAGRAM_HEADER_BYTES:
                continue
            magic, delivery, q, lo, size = _HEADER.unpack_from(buf, 0)
            body = n - DATAGRAM_HEADER_BYTES
            if magic != _MAGIC or lo + body > size:
                continue
            dropped = bool(self._drop) and self._rng.random() < self._drop
            with cond:
                self.datagrams += 1
                if dropped:
                    self.dropped += 1
                    self.dropped_bytes += body
                    if self._settling:
                        cond.notify_all()
                    continue
                frame = self._frames.get((delivery, q))
                if frame is None:
                    frame = self._frames[(delivery, q)] = _Frame(size)
                if lo not in frame.spans and frame.data.shape[0] == size:
                    frame.spans[lo] = lo + body
                    frame.data[lo : lo + body] = np.frombuffer(view[DATAGRAM_HEADER_BYTES:n], dtype=np.uint8)
                    frame.got += body
                if self._settling:  # else a waiter waits for the socket to be empty, not for each datagram
                    cond.notify_all()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"w")
        except BlockingIOError:  # a wake is pending already
            pass

    def gather(
        self, delivery: int, sizes: Sequence[int], expected: Sequence[int] | None = None
    ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
        """Frames ``0 .. len(sizes) - 1`` of ``delivery`` (their sizes as the control message
        gave them), once the sender has sent them all: their buffers, and for each frame ``q``
        still incomplete the byte spans it received (``(lo, hi)`` rows, ``int64``, neighbours
        joined; the rest of its buffer is unwritten). A frame is complete when ``expected[q]`` of
        its bytes have come (the spans of its groups, :meth:`MulticastSender.schedule`), or all
        of them; the bytes of other workers' spans are then left unwritten.

        It returns when every frame is complete, or else once the receiving thread has read all
        the socket held and no datagram came for :attr:`settle` seconds (at most :attr:`idle`
        seconds after the call). The delivery's buffers, and older ones', are then let go."""
        delivery &= 0xFFFFFFFF
        sizes = [int(s) for s in sizes]
        want = sizes if expected is None else [int(e) for e in expected]
        if len(want) != len(sizes) or any(not 0 <= w <= z for w, z in zip(want, sizes, strict=True)):
            raise ValueError("Argument 'expected' must give each frame 0 to its size in bytes.")
        frames = self._frames

        def done() -> bool:
            return all(
                w == 0 or ((f := frames.get((delivery, q))) is not None and f.got == w)
                for q, w in enumerate(want)
            )

        def drained_since(drains: int) -> Callable[[], bool]:
            return lambda: self._drains > drains or done()

        def heard_since(seen: int) -> Callable[[], bool]:
            return lambda: self.datagrams > seen or done()

        deadline = time.monotonic() + self.idle
        with self._cond:
            while not done():
                if self._busy or select.select([self._sock.fileno()], [], [], 0)[0]:
                    # the thread reads all the socket holds, then says it is empty
                    drained = drained_since(self._drains)
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._cond.wait_for(drained, left):
                        break
                heard = heard_since(self.datagrams)
                left = min(self.settle, deadline - time.monotonic())
                if left <= 0:
                    break
                self._settling = True
                try:
                    if not self._cond.wait_for(heard, left):
                        break  # quiet for `settle` (or past `idle`): what is missing is lost
                finally:
                    self._settling = False
            out: list[np.ndarray] = []
            lacking: dict[int, np.ndarray] = {}
            for q, (size, w) in enumerate(zip(sizes, want, strict=True)):
                f = frames.pop((delivery, q), None)
                if f is None or f.data.shape[0] != size:
                    f = _Frame(size)
                out.append(f.data)
                if f.got != w:
                    lacking[q] = f.received()
            for key in [k for k in frames if k[0] <= delivery]:  # this delivery's and older
                del frames[key]
        return out, lacking

    def collect(
        self, delivery: int, sizes: Sequence[int], expected: Sequence[int] | None = None
    ) -> list[np.ndarray]:
        """:meth:`gather`'s frames, an empty buffer for each still incomplete."""
        out, lacking = self.gather(delivery, sizes, expected)
        return [np.empty(0, dtype=np.uint8) if q in lacking else f for q, f in enumerate(out)]

    def close(self) -> None:
        self._stopping = True
        self._wake()
        self._thread.join(timeout=1.0)
        self._sock.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
