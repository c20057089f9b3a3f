"""The ``torch.distributed`` (gloo) transport, for jobs launched by ``torchrun`` (torch imported
lazily, here and in the torch adapter only)."""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import sys
import time
from typing import Any, NoReturn

import numpy as np

from .._checks import check_int, check_seconds
from ..errors import RankTimeout, TransportError
from .base import LinkStats
from .frames import FramedLink
from .mpi import _POST, _WORD

#: Tag of the rows of each worker's first batch, and of the frames sent point to point, on gloo.
_TORCH_INIT_TAG, _TORCH_TAG = 11, 7
#: The tag of the workers' exchange between each other.
_EXCHANGE_TAG = 13

#: Seconds a rank that lost a peer waits before it ends, so that ``torchrun`` sees the peer's
#: own end first (and names it as the job's first failure) and stops this rank meanwhile.
LOST_PEER_GRACE = 3.0

#: Words of gloo's messages when the other end of a connection is gone.
_GONE = ("Connection closed by peer", "Connection reset by peer", "Read error", "Write error", "Broken pipe")

#: Numbers the links a process makes (collectively, so in the same order on every rank).
_LINKS = itertools.count()


def torch_world() -> tuple[int, int] | None:
    """``(rank, world size)`` of ``torch.distributed`` when it is initialized, else None.

    Imports ``torch`` only when it is installed and already imported by the program (a job
    that never imported it never initialized a process group).
    """
    if sys.modules.get("torch") is None:
        return None
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


#: Variables ``torchrun`` (``torch.distributed.run``) sets in every process it starts.
TORCHRUN_VARIABLES = ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def torchrun_refusal() -> str | None:
    """The one-line message for a process ``torchrun`` started before ``init_process_group``, else None.

    ``torchrun`` sets :data:`TORCHRUN_VARIABLES` but leaves ``torch.distributed`` to the program;
    without a process group every rank would fall back to MPI, each in a world of its own.

    Examples
    --------
    >>> import os
    >>> any(v in os.environ for v in TORCHRUN_VARIABLES) or torchrun_refusal() is None
    True
    """
    if not any(v in os.environ for v in TORCHRUN_VARIABLES) or torch_world() is not None:
        return None
    rank, size = os.environ.get("RANK", "?"), os.environ.get("WORLD_SIZE", "?")
    return (
        f"rank {rank} of {size} was started by torchrun, but torch.distributed is not initialized: "
        'call torch.distributed.init_process_group("gloo") first.'
    )


def meet(store: Any, rank: int, size: int, timeout: float, *, pause: float = 0.02) -> list[int]:
    """Rank ``rank`` of ``size`` marks ``store`` and waits, ``timeout`` seconds at most, for every
    other rank's mark; returns the ranks that did not mark in time (empty once all did).

    The link's gloo group waits for every rank as it forms, without saying which one it waits
    for: the transport meets here first, so that a rank that never makes its link is named.

    Examples
    --------
    >>> from torch.distributed import HashStore  # doctest: +SKIP
    >>> store = HashStore()  # doctest: +SKIP
    >>> meet(store, 0, 3, 0.1)  # doctest: +SKIP
    [1, 2]
    """
    store.set(f"here/{rank}", "1")
    deadline = time.monotonic() + timeout
    missing = [r for r in range(size) if r != rank]
    while True:
        missing = [r for r in missing if not store.check([f"here/{r}"])]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(pause)


def default_link(*, join_timeout: float | None = None) -> Any:
    """The link of a job of the default kind: over ``torch.distributed`` when it is initialized, else MPI.
    (``join_timeout``: see :class:`TorchTransport`.)

    Raises
    ------
    TransportError
        In a process ``torchrun`` started whose ``torch.distributed`` is not initialized
        (:func:`torchrun_refusal`, one line saying what to call).
    """
    if torch_world() is not None:
        return TorchTransport(join_timeout=join_timeout)
    refusal = torchrun_refusal()
    if refusal is not None:
        raise TransportError(refusal)
    from .mpi import MPITransport

    return MPITransport()


class TorchTransport(FramedLink):
    """The shared link over ``torch.distributed`` (gloo): what :class:`MPITransport` offers, under torchrun.

    The same members as :class:`MPITransport` (frames broadcast and counted as there, the setup,
    the protocol's control messages with a deadline on every wait), over a gloo process group of
    its own, over every rank of the job, so that the delivery never interleaves with the
    training job's own collectives (a DDP allreduce over the workers, say). The group is made
    from the default group's store but is not registered with ``torch.distributed``: a rank
    that calls ``destroy_process_group()`` (before it stops early, say) keeps its link, and
    still tells the master that it stops. Rank ``root`` is the
    master, worker ``k`` the ``k``-th other rank. ``torch.distributed`` must be initialized
    (``init_process_group``, as ``torchrun`` jobs do first); making the transport is collective.

    Parameters
    ----------
    root : int
        The master's rank.
    timeout : float
        Seconds a collective of the link's group may wait before it fails (a backstop: the loader's
        watchdog ends the job first).
    join_timeout : float, optional
        Seconds every rank has to make its link (default ``timeout``): a rank that has not is
        named in one line, and this rank ends (``torchrun`` then stops the others).
    piece_bytes : int, optional
        Largest piece of a frame per broadcast (default 64 MiB).

    Examples
    --------
    >>> link = TorchTransport()  # doctest: +SKIP
    >>> link.K, link.is_master  # doctest: +SKIP
    (4, True)
    """

    def __init__(
        self,
        *,
        root: int = 0,
        timeout: float = 300.0,
        piece_bytes: int | None = None,
        peers: bool = False,
        join_timeout: float | None = None,
    ) -> None:
        world = torch_world()
        if world is None:
            raise TransportError(
                "torch.distributed is not initialized: call torch.distributed.init_process_group first "
                "(torchrun jobs do), or use MPITransport under mpiexec."
            )
        import datetime
        import warnings

        import torch
        import torch.distributed as dist

        # Frames leave the master read-only; the broadcast only reads them.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", module=__name__)
        self._torch: Any = torch
        self._dist: Any = dist
        rank, size = world
        self.peers = bool(peers)
        if size < 2 and not self.peers:
            raise ValueError(f"torch.distributed must have at least 2 ranks (master, worker), not {size}.")
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        timeout = check_seconds(timeout, "timeout")
        join = timeout if join_timeout is None else check_seconds(join_timeout, "join_timeout")
        default = dist.distributed_c10d._get_default_store()
        store = dist.PrefixStore(f"coded_shuffle/link/{next(_LINKS)}", default)
        self.rank = rank  # (set again below) for the line that names a missing rank
        missing = meet(store, rank, size, join)
        if missing:
            self._absent(missing, size, join)
        #: The link's own gloo group (``torch.distributed.ProcessGroupGloo``), not registered.
        self.group: Any = dist.ProcessGroupGloo(store, rank, size, datetime.timedelta(seconds=float(timeout)))
        # Shut down at exit, after the loaders' own exit handlers (which may still tell the master
        # of a stop): a gloo group left to the interpreter's teardown can abort the process.
        atexit.register(self.close)
        self._bcast_options = dist.BroadcastOptions()
        self._bcast_options.rootRank = self.root
        self._bcast_options.rootTensor = 0
        piece_bytes = 1 << 26 if piece_bytes is None else piece_bytes
        self.piece_bytes = check_int(piece_bytes, "piece_bytes", minimum=1)
        self.K = size if self.peers else size - 1
        self.rank = rank
        self.is_master = rank == self.root and not self.peers
        #: This rank's worker number, or None on the master.
        self.worker: int | None = None if self.is_master else rank - (rank > self.root and not self.peers)
        self._stats = LinkStats()
        #: Bytes of control messages the master broadcast (frame sizes and destinations).
        self.control_bytes = 0
        self._buffer: np.ndarray | None = None

    def _absent(self, missing: list[int], size: int, seconds: float) -> NoReturn:
        """Ranks ``missing`` did not make their link: the first rank that did says so in one line
        and ends; the others end after :data:`LOST_PEER_GRACE` (``torchrun`` stops them meanwhile,
        having seen the first end)."""
        if self.rank == min(r for r in range(size) if r not in missing):
            who = ", ".join(self._who(r) for r in missing)
            print(
                f"coded_shuffle.transport: error: {self._who(self.rank)}: {who} did not make its link "
                f"within {seconds:g} s; ending the job",
                file=sys.stderr,
                flush=True,
            )
        else:
            time.sleep(LOST_PEER_GRACE)
        self.abort(1)

    def close(self) -> None:
        """Shut the link's group down (at exit; idempotent). The link cannot be used after."""
        group, self.group = self.group, None
        if group is not None:
            try:
                group.shutdown()
            except RuntimeError:  # pragma: no cover - a group whose peers are gone already
                pass

    def abort(self, status: int) -> NoReturn:
        """End this process now (``torchrun`` then stops the other ranks)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    def _who(self, rank: int | None) -> str:
        if rank is None:
            return "a peer"
        if self.peers:
            return f"rank {rank} (worker {rank}{', the leader' if rank == self.root else ''})"
        if rank == self.root:
            return f"the master (rank {rank})"
        return f"rank {rank} (worker {rank - (rank > self.root)})"

    def _wait(self, work: Any, peer: int | None, timeout: Any = None) -> None:
        """Wait for a gloo operation; a peer gone ends this rank with one line naming it.

        The line names this rank and the peer; the rank then waits :data:`LOST_PEER_GRACE`
        seconds (``torchrun`` stops it meanwhile, having seen the peer end first) and exits 1.
        """
        try:
            work.wait() if timeout is None else work.wait(timeout)
        except RuntimeError as exc:
            if not any(word in str(exc) for word in _GONE):
                raise
            me = self._who(self.rank)
            print(
                f"coded_shuffle.transport: error: {me}: lost {self._who(peer)}: its connection closed "
                "(the process ended or was killed); ending the job",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(LOST_PEER_GRACE)
            self.abort(1)

    def _tensor(self, arr: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(arr))

    def _bcast(self, arr: np.ndarray) -> None:
        """Broadcast ``arr`` (C-contiguous, written in place on the workers) as bytes (gloo has no uint64)."""
        flat = arr.reshape(-1).view(np.uint8)
        if flat.size:
            # A collective: the peer that went may be any of the job's.
            self._wait(self.group.broadcast([self._torch.from_numpy(flat)], self._bcast_options), None)

    # ---- the link's primitives (frames.FramedLink does the framing)

    def _bcast_raw(self, arr: np.ndarray) -> None:
        self._bcast(arr)

    def _send_raw(self, arr: np.ndarray, dest: int) -> None:
        self._wait(self.group.send([self._tensor(arr)], dest, _TORCH_TAG), dest)

    def _recv_raw(self, bufs: list[np.ndarray]) -> None:
        for b in bufs:
            self._wait(self.group.recv([self._tensor(b)], self.root, _TORCH_TAG), self.root)

    def _alltoall_raw(self, send: list[list[np.ndarray]]) -> list[np.ndarray]:
        """Worker: every other worker's bytes, point to point (the sizes first, then the bytes)."""
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers exchange frames.")
        me = self.worker
        peers = [j for j in range(self.K) if j != me]
        flat = [np.concatenate(bs) if bs else np.empty(0, np.uint8) for bs in send]  # one message a peer
        sizes = {j: np.array([flat[j].shape[0]], dtype=np.int64) for j in peers}
        got = {j: np.zeros(1, dtype=np.int64) for j in peers}
        self._pairwise(
            [(sizes[j].view(np.uint8), j) for j in peers], [(got[j].view(np.uint8), j) for j in peers]
        )
        out = {j: np.empty(int(got[j][0]), dtype=np.uint8) for j in peers}
        self._pairwise(
            [(flat[j], j) for j in peers if flat[j].shape[0]], [(out[j], j) for j in peers if out[j].shape[0]]
        )
        return [out[j] if j != me else np.empty(0, np.uint8) for j in range(self.K)]

    def _round_raw(self, send: np.ndarray | None, to: int, recv: np.ndarray | None, frm: int) -> None:
        """Worker: one round of the exchange, a send to ``to`` and a receive from ``frm`` at once."""
        self._pairwise(
            [(send, to)] if send is not None and send.shape[0] else [],
            [(recv, frm)] if recv is not None and recv.shape[0] else [],
        )

    def _pairwise(self, sends: list[tuple[np.ndarray, int]], recvs: list[tuple[np.ndarray, int]]) -> None:
        """Post every send and receive between workers, then wait for them all."""
        works = [(self.group.send([self._tensor(b)], self.rank_of(j), _EXCHANGE_TAG), j) for b, j in sends]
        works += [(self.group.recv([self._tensor(b)], self.rank_of(j), _EXCHANGE_TAG), j) for b, j in recvs]
        for work, j in works:
            self._wait(work, self.rank_of(j))

    # ---- frames

    # ---- setup (not counted on the link)

    def share(self, value: Any = None) -> Any:
        """Collective: the leader's ``value`` (a small Python object), returned on every rank."""
        size = np.zeros(1, dtype=np.int64)
        if self.is_leader:
            data = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
            size[0] = data.size
        self._bcast(size)
        if not self.is_leader:
            data = np.empty(int(size[0]), dtype=np.uint8)
        self._bcast(np.ascontiguousarray(data))
        return value if self.is_leader else pickle.loads(data.tobytes())

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the leader's array copied into ``arr`` on every rank (same shape and dtype)."""
        if self.is_leader:
            self._bcast(np.ascontiguousarray(arr))
            return arr
        got = np.ascontiguousarray(arr)
        self._bcast(got)
        arr[...] = got
        return arr

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """Master: send ``worker`` its first batch of rows (setup, point to point)."""
        self._master_only("send rows")
        flat = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
        if flat.size:
            dest = self.rank_of(worker)
            self._wait(self.group.send([self._tensor(flat)], dest, _TORCH_INIT_TAG), dest)

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """Worker: receive into ``out`` (C-contiguous) the rows the master sent it with :meth:`send_rows`."""
        flat = out.reshape(-1).view(np.uint8)
        if flat.size:
            self._wait(self.group.recv([self._tensor(flat)], self.root, _TORCH_INIT_TAG), self.root)
        return out

    def sync(self) -> None:
        """Collective: wait until every rank is here (a barrier of the link's group)."""
        self._wait(self.group.barrier(self._dist.BarrierOptions()), None)

    # ---- the protocol's control messages (pickled values, point to point, with deadlines)

    def _isend_value(self, value: Any, dst: int, tag: int) -> list[Any]:
        data = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8).copy()
        head = np.array([data.size], dtype=np.int64)
        works = [self.group.send([self._tensor(b)], dst, tag) for b in (head, data)]
        return [works, head, data]  # the buffers stay alive until the sends are waited on

    def _irecv_value(self, src: int, tag: int, deadline: float) -> tuple[bool, Any]:
        """Receive one value from ``src`` by ``deadline``: ``(True, value)`` or ``(False, None)``."""
        import datetime

        head = np.zeros(1, dtype=np.int64)
        parts: list[np.ndarray] = [head]
        work = self.group.recv([self._tensor(head)], src, tag)
        for step in range(2):
            left = deadline - time.monotonic()
            if left <= 0 and not work.is_completed():
                return False, None
            try:
                self._wait(work, src, datetime.timedelta(seconds=max(left, 1e-3)))
            except RuntimeError as exc:
                if "imeout" in str(exc) or "imed out" in str(exc):
                    return False, None
                raise TransportError(f"rank {self.rank}: from {self._who(src)}: {exc}") from None
            if step == 0:
                data = np.empty(int(head[0]), dtype=np.uint8)
                parts.append(data)
                work = self.group.recv([self._tensor(data)], src, tag)
        return True, pickle.loads(parts[1].tobytes())

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """Master: one post from every worker, in worker order, each within ``timeout`` seconds.

        Raises
        ------
        RankTimeout
            Naming the workers (and ranks) that did not post within ``timeout`` seconds.
        """
        self._lead_only("gather the posts")
        deadline = time.monotonic() + timeout
        got: list[Any] = [None] * self.K  # among peers the leader's own post is its driver's
        for k in self._posters():
            ok, value = self._irecv_value(self.rank_of(k), _POST, deadline)
            if not ok:
                raise RankTimeout(
                    f"no answer from worker {k} (rank {self.rank_of(k)}) within {timeout:g} s, "
                    f"at the {stage!r} round"
                )
            got[k] = value
        return got

    def announce(self, word: Any) -> None:
        """Master: send ``word`` to every worker."""
        self._lead_only("announce")
        sent = [(self.rank_of(k), self._isend_value(word, self.rank_of(k), _WORD)) for k in self._posters()]
        for dest, (works, *_) in sent:
            for w in works:
                self._wait(w, dest)

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """Worker: send ``value`` to the master; return the master's next word, within ``timeout`` s.

        Raises
        ------
        RankTimeout
            When the master sends no word within ``timeout`` seconds.
        """
        if self.is_leader:
            raise TransportError(f"Rank {self.rank} leads the rounds: only the other ranks post.")
        works, *_keep = self._isend_value(value, self.root, _POST)
        ok, word = self._irecv_value(self.root, _WORD, time.monotonic() + timeout)
        if not ok:
            who = "the leader" if self.peers else "the master"
            raise RankTimeout(
                f"no word from {who} (rank {self.root}) within {timeout:g} s, at the {stage!r} round"
            )
        for w in works:
            self._wait(w, self.root)
        return word
