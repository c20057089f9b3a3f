"""What every link between processes shares, written once: its state and the protocol's control
plane over two primitives of the link.

A link between processes (:class:`~coded_shuffle.transport.frames.FramedLink`, and through it
every link of :data:`~coded_shuffle.transport.registry.LINKS`) is ``size`` ranks: rank ``root``
leads the control rounds (the master, or among peers a worker too); the others are the workers,
worker ``k`` the ``k``-th rank other than ``root`` (rank ``k`` among peers). The control plane,
here, carries small Python values (pickled):

- the protocol's rounds: :meth:`ControlPlane.gather_posts` (the leader, one post from each
  worker within a deadline), :meth:`ControlPlane.announce` (its word to each) and
  :meth:`ControlPlane.post` (a worker's post, then the leader's next word, within a deadline);
- the setup: :meth:`ControlPlane.share` and :meth:`ControlPlane.share_array` (the leader's
  value or array on every rank).

It stands on two primitives a link implements: a **broadcast** of a buffer from rank ``root``
(:meth:`ControlPlane._bcast_raw`) and a **tagged message** to a rank, sent at once and received
by a deadline (:meth:`ControlPlane._msg_send`, :meth:`ControlPlane._msg_recv`), so that every
wait for a message is bounded. The setup's rows, the barrier and the probe go over
the data plane's primitive, a set of sends and receives between ranks at once
(:meth:`ControlPlane._pairwise_raw`).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from .._checks import check_int
from ..errors import RankTimeout, TransportError
from .base import Counted, TokenBucket

#: Tags: frame pieces point to point; each worker's first batch; the exchange's transfers.
_TAG, _INIT_TAG, _ROUND_TAG = 7, 11, 13
#: Tags of the control plane's messages: a worker's post, the leader's word, a value gathered.
_POST, _WORD, _GATHER = 21, 22, 23
#: Tag of the bytes of a probe of the links (:meth:`ControlPlane.probe_phases`).
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


#: Transfers of :meth:`ControlPlane._pairwise_raw`: a buffer and the rank it goes to or comes from.
Transfers = list[tuple[np.ndarray, int]]


def _pickled(value: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


class ControlPlane(Counted):
    """A link's ranks and the control plane over its primitives (module docstring); the state is
    set by :class:`~coded_shuffle.transport.frames.FramedLink`, on which every link stands."""

    #: This rank, the number of ranks, the rank that leads the control rounds (the master, or a peer).
    rank: int
    size: int
    root: int
    #: A job of peers: every rank a worker (worker ``k`` is rank ``k``), no master sends frames.
    peers: bool = False
    K: int
    is_master: bool
    #: This rank's worker number, or None on the master.
    worker: int | None
    #: Bytes of control messages the master broadcast (frame sizes and destinations).
    control_bytes: int

    # ---- the primitives of a link

    def _bcast_raw(self, arr: np.ndarray) -> None:  # pragma: no cover - abstract
        """Broadcast the C-contiguous ``arr`` from rank ``root`` (written in place elsewhere)."""
        raise NotImplementedError

    def _msg_send(self, data: np.ndarray, rank: int, tag: int) -> Callable[[], object]:  # pragma: no cover
        """Start sending the bytes ``data`` (1-D ``uint8``) to ``rank`` with ``tag``; return a
        function that waits until they are sent (messages of one tag to one rank stay in order)."""
        raise NotImplementedError

    def _msg_recv(self, rank: int, tag: int, deadline: float) -> np.ndarray | None:  # pragma: no cover
        """The next message of ``rank`` with ``tag``, once it is in; None if it has not come by
        ``deadline`` (a :func:`time.monotonic` time; one that has passed still takes a message
        that is in). After None the link may keep no order for that rank and tag: the job ends."""
        raise NotImplementedError

    def _pairwise_raw(
        self, sends: Transfers, recvs: Transfers, *, tag: int, pace: TokenBucket | None = None
    ) -> None:  # pragma: no cover - abstract
        """Send each ``(buffer, rank)`` and receive each ``(buffer, rank)`` (in place), all at
        once with ``tag``, waiting on ``pace`` before each send; return when all are done. The
        transfers between two ranks of one tag keep their order."""
        raise NotImplementedError

    def _barrier(self) -> None:  # pragma: no cover - abstract
        """Wait until every rank is here."""
        raise NotImplementedError

    def abort(self, status: int) -> NoReturn:  # pragma: no cover - abstract
        """End the whole job now, from any thread, with exit status ``status``."""
        raise NotImplementedError

    # ---- the ranks

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

    def _master_only(self, what: str) -> None:
        if not self.is_master:
            raise TransportError(
                f"Rank {self.rank} is a worker: only the master (rank {self.root}) can {what}."
            )

    def _posters(self) -> list[int]:
        """The workers that post to the leader: all of them, but the leader's own among peers."""
        return [k for k in range(self.K) if k != self.worker]

    # ---- values between ranks (pickled, over the message primitive)

    def _values(self, ranks: list[int], tag: int, deadline: float) -> dict[int, Any]:
        """The next value of ``tag`` from each of ``ranks``: those that came by ``deadline``."""
        got: dict[int, Any] = {}
        for r in ranks:
            data = self._msg_recv(r, tag, deadline)
            if data is not None:
                got[r] = pickle.loads(data.tobytes())
        return got

    def _gather_values(self, value: Any, tag: int = _GATHER) -> list[Any] | None:
        """Collective: every rank's small picklable ``value``, by rank, on the leader (None
        elsewhere). No deadline: a step of a job that a watchdog bounds."""
        if not self.is_leader:
            self._msg_send(_pickled(value), self.root, tag)()
            return None
        others = [r for r in range(self.size) if r != self.rank]
        got = self._values(others, tag, float("inf"))
        return [value if r == self.rank else got[r] for r in range(self.size)]

    # ---- the protocol's control rounds (small values point to point, with deadlines)

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """The leader: one post from every worker, in worker order, each within ``timeout``
        seconds (among peers, the leader's own slot is left None for its driver to fill).

        Raises
        ------
        RankTimeout
            Naming the workers (and ranks) that did not post within ``timeout`` seconds.
        """
        self._lead_only("gather the posts")
        posters = self._posters()
        got = self._values([self.rank_of(k) for k in posters], _POST, time.monotonic() + timeout)
        missing = [k for k in posters if self.rank_of(k) not in got]
        if missing:
            who = ", ".join(f"worker {k} (rank {self.rank_of(k)})" for k in missing)
            raise RankTimeout(f"no answer from {who} within {timeout:g} s, at the {stage!r} round")
        return [got.get(self.rank_of(k)) if k != self.worker else None for k in range(self.K)]

    def announce(self, word: Any) -> None:
        """The leader: send ``word`` to every worker that posts."""
        self._lead_only("announce")
        data = _pickled(word)
        for wait in [self._msg_send(data, self.rank_of(k), _WORD) for k in self._posters()]:
            wait()

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """A worker: send ``value`` to the leader; return its next word, within ``timeout`` seconds.

        Raises
        ------
        RankTimeout
            When the leader sends no word within ``timeout`` seconds.
        """
        if self.is_leader:
            raise TransportError(f"Rank {self.rank} leads the rounds: only the other ranks post.")
        sent = self._msg_send(_pickled(value), self.root, _POST)
        got = self._values([self.root], _WORD, time.monotonic() + timeout)
        if not got:
            who = "the leader" if self.peers else "the master"
            raise RankTimeout(
                f"no word from {who} (rank {self.root}) within {timeout:g} s, at the {stage!r} round"
            )
        sent()
        return got[self.root]

    # ---- setup: what every rank learns before the first transition (not counted on the link)

    def share(self, value: Any = None) -> Any:
        """Collective: the leader's ``value`` (a small Python object), returned on every rank."""
        size = np.zeros(1, dtype=np.int64)
        data = _pickled(value) if self.is_leader else np.empty(0, dtype=np.uint8)
        size[0] = data.size
        self._bcast_raw(size)
        if not self.is_leader:
            data = np.empty(int(size[0]), dtype=np.uint8)
        self._bcast_raw(data)
        return value if self.is_leader else pickle.loads(data.tobytes())

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the leader's array copied into ``arr`` on every rank (same shape and dtype)."""
        if self.is_leader:
            self._bcast_raw(np.ascontiguousarray(arr))
            return arr
        got = np.ascontiguousarray(arr)  # ``arr`` itself when it is C-contiguous
        self._bcast_raw(got)
        if got is not arr:
            arr[...] = got
        return arr

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """The master: send ``worker`` its first batch of rows (setup, point to point)."""
        self._master_only("send rows")
        flat = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
        if flat.size:
            self._pairwise_raw([(flat, self.rank_of(worker))], [], tag=_INIT_TAG)

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """A worker: receive into ``out`` the rows the master sent it with :meth:`send_rows`."""
        buf = np.ascontiguousarray(out)
        flat = buf.reshape(-1).view(np.uint8)
        if flat.size:
            self._pairwise_raw([], [(flat, self.root)], tag=_INIT_TAG)
        if buf is not out:
            out[...] = buf
        return out

    def sync(self) -> None:
        """Collective: wait until every rank is here (a barrier), before a delivery is timed."""
        self._barrier()

    # ---- measurements of the links (the MPI experiment runner's probe and yardstick)

    def baseline_broadcast(self, nbytes: int) -> float | None:
        """Collective: one plain broadcast of ``nbytes`` bytes from the leader, the yardstick of a
        delivery. Returns, on the leader, the slowest worker's seconds to receive it (None elsewhere).
        """
        n = int(self.share(int(nbytes)))
        buf = np.ones(n, dtype=np.uint8)
        self.sync()
        t0 = time.perf_counter()
        self._bcast_raw(buf)
        took = time.perf_counter() - t0
        got = self._gather_values(None if self.is_master else took)
        return None if got is None else max(v for v in got if v is not None)

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
        self._barrier()
        t0 = time.perf_counter()
        into = [(np.empty(nb, np.uint8), src) for nb, src in recvs]
        self._pairwise_raw(sends, into, tag=_PROBE, pace=self._pace if self.is_master else None)
        got = self._gather_values(time.perf_counter() - t0)
        return float(self.share(None if got is None else max(got)))
