"""The ``torch.distributed`` (gloo) transport, for jobs launched by ``torchrun`` (torch imported
lazily, here and in the torch adapter only)."""

from __future__ import annotations

import atexit
import itertools
import os
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from .._checks import check_seconds
from .._progress import say
from ..errors import TransportError
from .base import TokenBucket
from .control import Transfers
from .frames import FramedLink

#: Seconds a rank that lost a peer waits before it ends, so that ``torchrun`` sees the peer's
#: own end first (and names it as the job's first failure) and stops this rank meanwhile: a
#: process that raised ends only after its interpreter's teardown, which on a host whose cores
#: are busy took more than 3 s. Under ``torchrun`` the job ends when that peer has ended.
LOST_PEER_GRACE = 10.0

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
        if size < 2 and not peers:
            raise ValueError(f"torch.distributed must have at least 2 ranks (master, worker), not {size}.")
        piece_bytes = 1 << 26 if piece_bytes is None else piece_bytes
        super().__init__(rank=rank, size=size, root=root, peers=peers, piece_bytes=piece_bytes)
        timeout = check_seconds(timeout, "timeout")
        join = timeout if join_timeout is None else check_seconds(join_timeout, "join_timeout")
        default = dist.distributed_c10d._get_default_store()
        store = dist.PrefixStore(f"coded_shuffle/link/{next(_LINKS)}", default)
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

    def _absent(self, missing: list[int], size: int, seconds: float) -> NoReturn:
        """Ranks ``missing`` did not make their link: the first rank that did says so in one line
        and ends; the others end after :data:`LOST_PEER_GRACE` (``torchrun`` stops them meanwhile,
        having seen the first end)."""
        if self.rank == min(r for r in range(size) if r not in missing):
            who = ", ".join(self._who(r) for r in missing)
            say(
                f"coded_shuffle.transport: error: {self._who(self.rank)}: {who} did not make its link "
                f"within {seconds:g} s; ending the job"
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

    def _wait(self, work: Any, peer: int | None) -> None:
        """Wait for a gloo operation; a peer gone ends this rank with one line naming it.

        The line names this rank and the peer; the rank then waits :data:`LOST_PEER_GRACE`
        seconds (``torchrun`` stops it meanwhile, having seen the peer end first) and exits 1.
        """
        try:
            work.wait()
        except RuntimeError as exc:
            self._gone(exc, peer)
            raise

    def _post(self, peer: int | None, op: Callable[..., Any], *args: Any) -> Any:
        """Post gloo's ``op`` (a group's ``send``, ``recv`` or ``broadcast``) with ``peer`` (None: a
        collective): gloo raises at the post where a connection is already closed, which ends this
        rank as a failed wait does (:meth:`_wait`)."""
        try:
            return op(*args)
        except RuntimeError as exc:
            self._gone(exc, peer)
            raise

    def _gone(self, exc: RuntimeError, peer: int | None) -> None:
        """If ``exc`` says the other end is gone: the line naming it, then the end of this rank."""
        if any(word in str(exc) for word in _GONE):
            me = self._who(self.rank)
            say(
                f"coded_shuffle.transport: error: {me}: lost {self._who(peer)}: its connection closed "
                "(the process ended or was killed); ending the job"
            )
            time.sleep(LOST_PEER_GRACE)
            self.abort(1)

    def _tensor(self, arr: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(arr))

    # ---- the link's primitives (control.ControlPlane and frames.FramedLink do the rest)

    def _bcast_raw(self, arr: np.ndarray) -> None:
        """As bytes (gloo has no uint64)."""
        flat = arr.reshape(-1).view(np.uint8)
        if flat.size:
            # A collective: the peer that went may be any of the job's.
            tensors = [self._torch.from_numpy(flat)]
            self._wait(self._post(None, self.group.broadcast, tensors, self._bcast_options), None)

    def _pairwise_raw(
        self, sends: Transfers, recvs: Transfers, *, tag: int, pace: TokenBucket | None = None
    ) -> None:
        """Post every send (as ``pace`` allows) and receive, then wait for them all."""
        works = []
        for b, r in sends:
            if pace is not None:
                pace.consume(b.shape[0])
            works.append((self._post(r, self.group.send, [self._tensor(b)], r, tag), r))
        works += [(self._post(r, self.group.recv, [self._tensor(b)], r, tag), r) for b, r in recvs]
        for work, r in works:
            self._wait(work, r)

    def _msg_send(self, data: np.ndarray, rank: int, tag: int) -> Callable[[], object]:
        """The size, then the bytes; the waits keep both buffers until they are sent."""
        head = np.array([data.size], dtype=np.int64)
        works = [
            self._post(rank, self.group.send, [self._tensor(b.view(np.uint8))], rank, tag)
            for b in (head, data)
        ]

        def wait() -> tuple[np.ndarray, np.ndarray]:
            for w in works:
                self._wait(w, rank)
            return head, data

        return wait

    def _msg_recv(self, rank: int, tag: int, deadline: float) -> np.ndarray | None:
        """The size by ``deadline`` (a gloo receive's own wait), then the bytes, which follow it."""
        import datetime

        head = np.zeros(1, dtype=np.int64)
        work = self._post(rank, self.group.recv, [self._tensor(head.view(np.uint8))], rank, tag)
        if deadline != float("inf"):
            left = datetime.timedelta(seconds=max(deadline - time.monotonic(), 1e-3))
            try:
                work.wait(left)
            except RuntimeError as exc:
                if "imeout" in str(exc) or "imed out" in str(exc):
                    return None
                self._gone(exc, rank)
                raise TransportError(f"rank {self.rank}: from {self._who(rank)}: {exc}") from None
        else:
            self._wait(work, rank)
        data = np.empty(int(head[0]), dtype=np.uint8)
        self._wait(self._post(rank, self.group.recv, [self._tensor(data)], rank, tag), rank)
        return data

    def _barrier(self) -> None:
        self._wait(self.group.barrier(self._dist.BarrierOptions()), None)
