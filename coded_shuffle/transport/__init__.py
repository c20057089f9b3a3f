"""Transports: how frames go from the master to the workers, behind one small interface.

A transport models the shared link of the setting: the master **broadcasts** each frame
(:doc:`docs/wire-format.md`) to every worker, and it counts what leaves the master, which is the
honest cost of a shared link. The interface, :class:`Transport`, is six members:

``K``
    number of workers.
``send(frames)``
    master side: broadcast a sequence of frames (``uint8`` buffers) to all workers.
``send_to(frames)``
    master side: send worker ``k`` only the frames ``frames[k]`` (unicast, the uncoded scheme).
``receive(worker)``
    worker side: return, in order, every frame sent since that worker's last ``receive``.
``sync()``
    every party waits for the others (a barrier; nothing to do in one process).
``stats``
    a :class:`LinkStats` of frames, symbols and bytes that left the master so far.

Frames are opaque bytes to a transport: it reads only ``n_symbols`` from the header to count
symbols, and it must deliver every frame whole and in order (a frame it cannot deliver raises
:class:`~coded_shuffle.errors.TransportError`). Corruption is the codec's business: a worker
rejects a bad frame or record and the engine repairs it.

:class:`InProcessTransport` runs everything in one process with zero copies: every worker
receives the very buffer the master sent (read-only). A ``fault`` hook can corrupt or drop what
a given worker receives, to test the repair path.

:class:`MPITransport` carries the same frames between processes: rank 0 is the master, rank
``k + 1`` is worker ``k``. :meth:`MPITransport.send` broadcasts (``MPI_Bcast``), and
:meth:`MPITransport.send_to` sends each worker its own frames point to point (the uncoded
baseline); both count what leaves the master. :meth:`MPITransport.offer` and
:meth:`MPITransport.collect` are the alternative a user would reach for without coding: the
workers send each other the records that move, directly (``MPI_Alltoallv``), the master taking
no part. :class:`TorchTransport` is the same link over ``torch.distributed`` (gloo). Besides
frames a link between processes carries the transition protocol's control messages
(:meth:`~.control.ControlPlane.gather_posts`, :meth:`~.control.ControlPlane.announce`,
:meth:`~.control.ControlPlane.post`), each wait bounded by a timeout, and the setup of a job
(:meth:`~.control.ControlPlane.share`, :meth:`~.control.ControlPlane.send_rows`): written once
(:mod:`.control`, :mod:`.frames`) over a few primitives each link implements. ``mpi4py`` and
``torch`` are imported lazily, here only, so this package imports without them.
:class:`MulticastLink` wraps such a link and sends the master's broadcasts as UDP multicast
datagrams. :data:`LINKS` names the kinds of link, and :func:`default_link` makes the one of this
process's job.

:class:`TokenBucket` paces a link to a known speed: a transport given one waits, before each
piece of a frame leaves the master, until the bucket holds that many bytes, so that the wall time
of a delivery follows the bytes the master emits even when all processes share one machine.

Layout
------
:mod:`.base` (the interface, :class:`LinkStats`, :class:`TokenBucket`), :mod:`.control` (the
ranks and the control plane of a link between processes), :mod:`.frames` (the framing of its
deliveries and the workers' exchange), :mod:`.inprocess`, :mod:`.mpi` and :mod:`.torch_dist`,
one module a transport, :mod:`.multicast_link` (the link that wraps another), :mod:`.registry`
(the kinds of link, the default one).
"""

from __future__ import annotations

from .base import ControlLink, LinkStats, TokenBucket, Transport, frame_symbols
from .frames import FramedLink
from .inprocess import InProcessTransport
from .mpi import (
    MPITransport,
    launch_rank,
    mpi_abort,
    mpi_exit,
    mpi_refuse,
    mpi_start,
    mpi_world,
    rank_markers,
)
from .multicast_link import MulticastLink
from .registry import LINKS, LinkKind, default_link
from .torch_dist import TorchTransport, torch_world

__all__ = [
    "LinkStats",
    "Transport",
    "ControlLink",
    "TokenBucket",
    "InProcessTransport",
    "MPITransport",
    "TorchTransport",
    "FramedLink",
    "MulticastLink",
    "LINKS",
    "LinkKind",
    "default_link",
    "torch_world",
    "frame_symbols",
    "mpi_world",
    "mpi_start",
    "launch_rank",
    "rank_markers",
    "mpi_exit",
    "mpi_refuse",
    "mpi_abort",
]
