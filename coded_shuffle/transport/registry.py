"""The links between processes, by name, and the one default link of a job.

:data:`LINKS` holds one :class:`LinkKind` a link: how to make one (``peers``, ``join_timeout``),
whether this process runs in a job of its kind, and the one-line refusal of a process that is in
such a job but cannot make its link. :func:`default_link` takes the first kind, in the table's
order, whose job this is. A new link is a module of this package with a class on
:class:`~coded_shuffle.transport.frames.FramedLink` and its line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import TransportError
from .base import ControlLink
from .torch_dist import torch_world, torchrun_refusal

__all__ = ["LinkKind", "LINKS", "default_link"]


@dataclass(frozen=True)
class LinkKind:
    """A kind of link between processes.

    Attributes
    ----------
    make : callable
        ``make(peers=..., join_timeout=...)``: this process's link of a job with a master, or of
        peers (collective: every rank makes it).
    here : callable
        ``here()``: whether this process runs in a job of this kind.
    refusal : callable
        ``refusal()``: the one-line message of a process in such a job that cannot make the link
        (None when it can, or is in no such job).
    """

    make: Callable[..., ControlLink]
    here: Callable[[], bool]
    refusal: Callable[[], str | None] = lambda: None


def _torch_link(*, peers: bool = False, join_timeout: float | None = None) -> ControlLink:
    from .torch_dist import TorchTransport

    return TorchTransport(peers=peers, join_timeout=join_timeout)


def _mpi_link(*, peers: bool = False, join_timeout: float | None = None) -> ControlLink:
    from .mpi import MPITransport

    return MPITransport(peers=peers)


#: The kinds of link, by name, in the order :func:`default_link` asks them; MPI, last, is every
#: other job's.
LINKS: dict[str, LinkKind] = {}
LINKS["torch"] = LinkKind(_torch_link, lambda: torch_world() is not None, torchrun_refusal)
LINKS["mpi"] = LinkKind(_mpi_link, lambda: True)


def default_link(*, peers: bool = False, join_timeout: float | None = None) -> ControlLink:
    """The link of this process's job (collective): of the first kind of :data:`LINKS` whose job
    this is (over ``torch.distributed`` when it is initialized, else MPI); ``peers``: a job of
    peers, every rank a worker; ``join_timeout``: the seconds every rank has to make its link,
    where the kind bounds it (:class:`~coded_shuffle.transport.TorchTransport`).

    Raises
    ------
    TransportError
        In a process of a kind's job that cannot make its link (``torchrun`` started it and its
        ``torch.distributed`` is not initialized: one line saying what to call).
    """
    for kind in LINKS.values():
        if kind.here():
            return kind.make(peers=peers, join_timeout=join_timeout)
        refusal = kind.refusal()
        if refusal is not None:
            raise TransportError(refusal)
    raise TransportError("no kind of link runs this process's job")  # pragma: no cover - MPI's does
