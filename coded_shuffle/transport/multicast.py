"""The master's broadcast as UDP multicast datagrams: one send reaches every worker.

A network whose switch (or bridge) replicates a multicast datagram carries the master's coded
symbols to every worker for the price of one transmission, where ``MPI_Bcast`` is a chain of
unicasts relayed by the workers' uplinks. :class:`MulticastSender` cuts each frame into datagrams
of at most ``datagram_bytes`` (by default 1472: one Ethernet frame of 1500 bytes, never
fragmented), each with a header of :data:`DATAGRAM_HEADER_BYTES`::

    magic "CSMD" | delivery (u32) | frame (u32) | offset (u32) | frame bytes (u32)

(little-endian), paced by a :class:`~coded_shuffle.transport.base.TokenBucket` when given.
:class:`MulticastReceiver` joins the group and, on a thread of its own, copies each datagram's
bytes into its frame; :meth:`MulticastReceiver.collect` returns a delivery's frames once they are
whole, or, when no datagram has come for ``idle`` seconds, the whole ones and an empty buffer for
each incomplete one. UDP may lose or reorder datagrams: a frame that misses some is an empty
buffer, which the worker's decoder rejects, and its records are repaired by the protocol's repair
rounds (the control messages, the frame sizes included, travel over the process link, which is
reliable). Nothing is lost and nothing waits past ``idle``.

Groups are IPv4 multicast addresses; :func:`parse_group` takes ``GROUP:PORT``.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import threading
import time
from collections.abc import Sequence

import numpy as np

from .._checks import check_int
from ..errors import TransportError
from .base import TokenBucket

__all__ = ["MulticastSender", "MulticastReceiver", "parse_group", "DATAGRAM_HEADER_BYTES"]

_HEADER = struct.Struct("<4sIIII")
#: Bytes of the header of every datagram.
DATAGRAM_HEADER_BYTES = _HEADER.size
_MAGIC = b"CSMD"
#: The largest UDP payload in one IPv4 packet of 1500 bytes (20 of IP, 8 of UDP).
DEFAULT_DATAGRAM_BYTES = 1472
_MAX_DATAGRAM = 65507


def parse_group(text: str) -> tuple[str, int]:
    """``GROUP:PORT`` as ``(group, port)``: an IPv4 multicast group and a UDP port.

    Examples
    --------
    >>> parse_group("239.1.2.3:5000")
    ('239.1.2.3', 5000)
    >>> parse_group("10.0.0.1:5000")
    Traceback (most recent call last):
    ...
    ValueError: --multicast: '10.0.0.1' is not an IPv4 multicast group (224.0.0.0/4)
    """
    host, sep, port = str(text).rpartition(":")
    if not sep:
        raise ValueError(f"--multicast: {text!r} is not GROUP:PORT")
    try:
        group = ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"--multicast: {host!r} is not an IPv4 address") from None
    if not group.is_multicast:
        raise ValueError(f"--multicast: {host!r} is not an IPv4 multicast group (224.0.0.0/4)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--multicast: the port must be 1 to 65535, not {port!r}")
    return str(group), int(port)


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
    ) -> None:
        self.group, self.port = parse_group(f"{group}:{port}")
        self.datagram_bytes = _check_datagram(datagram_bytes)
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

    def send(self, frames: Sequence[np.ndarray], delivery: int) -> None:
        """Send ``frames`` (1-D ``uint8``) as delivery number ``delivery``; raise
        :class:`~coded_shuffle.errors.TransportError` in one line when the host cannot send to
        the group (no route for it)."""
        step = self.datagram_bytes - DATAGRAM_HEADER_BYTES
        addr = (self.group, self.port)
        head = bytearray(DATAGRAM_HEADER_BYTES)
        for q, frame in enumerate(frames):
            view = memoryview(np.ascontiguousarray(frame).data).cast("B")
            size = len(view)
            for lo in range(0, max(size, 1), step):
                chunk = view[lo : lo + step]
                _HEADER.pack_into(head, 0, _MAGIC, delivery & 0xFFFFFFFF, q, lo, size)
                if self.pace is not None:
                    self.pace.consume(DATAGRAM_HEADER_BYTES + len(chunk))
                try:
                    self._sock.sendmsg([head, chunk], [], 0, addr)
                except OSError as exc:
                    raise TransportError(
                        f"multicast to {self.group}:{self.port} failed ({exc.strerror or exc}): "
                        "the host has no route for the group"
                    ) from None
                self.datagrams += 1
                self.bytes += DATAGRAM_HEADER_BYTES + len(chunk)

    def close(self) -> None:
        self._sock.close()


class _Frame:
    __slots__ = ("data", "have", "got")

    def __init__(self, size: int) -> None:
        self.data = np.empty(size, dtype=np.uint8)
        self.have: set[int] = set()
        self.got = 0


class MulticastReceiver:
    """A worker's side: joins ``group:port`` and gathers each delivery's frames from datagrams.

    Parameters
    ----------
    group, port : str, int
        As the sender's.
    interface : str
        The address of the interface to join on (default ``0.0.0.0``: the route's).
    idle : float
        Seconds without a datagram after which :meth:`collect` gives up on what is missing.
    datagram_bytes : int
        The largest datagram to read (default: the largest UDP payload).
    drop : float
        Drop this share of the datagrams on arrival, at random (tests of the repairs only).
    """

    def __init__(
        self,
        group: str,
        port: int,
        *,
        interface: str = "0.0.0.0",
        idle: float = 1.0,
        datagram_bytes: int = _MAX_DATAGRAM,
        drop: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.group, self.port = parse_group(f"{group}:{port}")
        if not 0 < idle < 1e6:
            raise ValueError(f"Argument 'idle' must be a positive number of seconds, not {idle!r}.")
        if not 0 <= drop <= 1:
            raise ValueError(f"Argument 'drop' must be a share from 0 to 1, not {drop!r}.")
        self.idle, self._drop, self._rng = float(idle), float(drop), np.random.default_rng(seed)
        self._size = _check_datagram(datagram_bytes)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 26)
        sock.bind((self.group, self.port))
        mreq = socket.inet_aton(self.group) + socket.inet_aton(interface)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        except OSError as exc:
            sock.close()
            raise TransportError(
                f"cannot join the multicast group {self.group} ({exc.strerror or exc}): "
                "the host has no route for it"
            ) from None
        sock.settimeout(0.05)
        self._sock = sock
        self._frames: dict[tuple[int, int], _Frame] = {}
        self._lock = threading.Lock()
        self._last = time.monotonic()
        #: Datagrams received (dropped ones included) and dropped on purpose.
        self.datagrams = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coded_shuffle-multicast", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buf = bytearray(self._size)
        view = memoryview(buf)
        while not self._stop.is_set():
            try:
                n = self._sock.recv_into(buf)
            except TimeoutError:
                continue
            except OSError:
                return
            if n < DATAGRAM_HEADER_BYTES:
                continue
            magic, delivery, q, lo, size = _HEADER.unpack_from(buf, 0)
            body = n - DATAGRAM_HEADER_BYTES
            if magic != _MAGIC or lo + body > size:
                continue
            self.datagrams += 1
            if self._drop and self._rng.random() < self._drop:
                self.dropped += 1
                continue
            with self._lock:
                self._last = time.monotonic()
                frame = self._frames.get((delivery, q))
                if frame is None:
                    frame = self._frames[(delivery, q)] = _Frame(size)
                if lo in frame.have or frame.data.shape[0] != size:
                    continue
                frame.have.add(lo)
                frame.data[lo : lo + body] = np.frombuffer(view[DATAGRAM_HEADER_BYTES:n], dtype=np.uint8)
                frame.got += body

    def collect(self, delivery: int, sizes: Sequence[int]) -> list[np.ndarray]:
        """Frames ``0 .. len(sizes) - 1`` of ``delivery`` (their sizes as the control message
        gave them): each whole, or an empty buffer for one still incomplete after :attr:`idle`
        seconds without a datagram. The delivery's buffers are then released."""
        delivery &= 0xFFFFFFFF
        sizes = [int(s) for s in sizes]
        with self._lock:
            self._last = max(self._last, time.monotonic())  # the wait starts now at the latest
        while True:
            with self._lock:
                done = (
                    all(
                        (f := self._frames.get((delivery, q))) is not None and f.got == size
                        for q, size in enumerate(sizes)
                    )
                    or not sizes
                )
                quiet = time.monotonic() - self._last > self.idle
            if done or quiet:
                break
            time.sleep(0.001)
        with self._lock:
            out = []
            for q, size in enumerate(sizes):
                f = self._frames.pop((delivery, q), None)
                whole = f is not None and f.got == size and f.data.shape[0] == size
                out.append(f.data if whole else np.empty(0, dtype=np.uint8))  # type: ignore[union-attr]
            for key in [k for k in self._frames if k[0] <= delivery]:  # this delivery's and older
                del self._frames[key]
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._sock.close()
