"""Schemes: what the master sends in one transition and how a worker takes it in.

A scheme is the one object the transition protocol (:mod:`coded_shuffle.engine.protocol`) is
given (a :class:`Scheme`, the declared interface; :class:`SchemeBase` implements what the
schemes share). The master's half:

``plan(p_t, p_t1, dataset, *, strategy, exact_bound) -> Planned``
    this shuffle's plan, with the loads and the bound the report gives;
``encode(plan, dataset, *, epoch, max_frame_bytes) -> Encoded``
    its delivery as frames, made before the delivery is timed; the protocol then puts them on
    the link with :func:`send`;
``check(dataset, held, p_t1) -> (records checked, ok)``
    the verdict on what the workers hold afterwards.

A worker's half:

``need(p_t1, worker) -> ids``
    what it must hold after the transition;
``take(link, worker, cache, need, ...) -> Taken``
    receive what was sent and rebuild those from its cache.

:class:`CodedScheme` sends the coded plan (order-2 XORs, cycle symbols, lone leftovers) in one
broadcast; :class:`UncodedScheme` sends every record that changes worker alone, to its new holder
only; :class:`ExchangeScheme` is the alternative without the master's data: the workers send each
other the units each misses (``MPI_Alltoallv``); :class:`SplitScheme` does both at once, the master
coding a share of the moved records where it multicasts; :class:`StorageScheme` delivers, when every worker
stores ``M > 1`` batches, the pieces of :mod:`coded_shuffle.storage` in symbols of many terms. A
new scheme is a new object of this kind, never a new copy of the transition loop.

The registry (:data:`REGISTRY`, one :class:`Registered` a line) names every scheme: its factory,
where it runs (with a master, among peers, or both), whether the master sends, and its predicted
time on a network (:data:`coded_shuffle.network.PREDICTIONS`). Every list of modes (the command
line's ``--mode`` choices, the modes the master sends in, the ranks a job needs) is derived from
it; :func:`scheme_for` builds a registered scheme by name, :func:`resolve` takes a name or a
scheme of one's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...network import PREDICTIONS, Loads
from ..holding import Batches, Holding, PieceStorage, holding_for
from ._base import Encoded, Given, Planned, Scheme, SchemeBase, Taken, Tamper, receive_decode, send
from .coded import CodedScheme, UncodedScheme, uncoded_frames
from .exchange import ExchangeScheme
from .split import SplitScheme, split_placements
from .storage import StorageScheme, coded_scheme

__all__ = [
    "Planned", "Encoded", "Given", "Taken", "Scheme", "SchemeBase", "CodedScheme", "UncodedScheme",
    "ExchangeScheme", "SplitScheme", "split_placements", "Registered", "REGISTRY", "registered", "names",
    "runs_among_peers", "ranks", "resolve",
    "StorageScheme", "SCHEMES", "MODES", "scheme_for", "send", "uncoded_frames", "receive_decode", "Tamper",
]  # fmt: skip

#: Where a scheme runs: with a master (a job of ``K + 1`` ranks), among peers (``K``), or both.
WHERE = ("master", "peers", "both")


@dataclass(frozen=True)
class Registered:
    """A scheme as the registry knows it.

    Attributes
    ----------
    name : str
        Its ``--mode`` name (and a report's ``mode``).
    factory : callable
        ``factory(holding, *, peers, network) -> Scheme``: the scheme for the placement model
        ``holding`` (:func:`~coded_shuffle.engine.holding.holding_for`), in a job of peers or
        not, on ``network`` (a :class:`~coded_shuffle.network.Network` or None); it raises, naming
        the argument, what it cannot serve.
    where : str
        ``"master"``, ``"peers"`` or ``"both"`` (:data:`WHERE`).
    master_sends : bool
        Whether the master sends frames (its options apply; its workers receive them).
    coded : bool
        Whether the master sends a coded plan to every worker (what ``--strategy`` packs and
        ``--multicast`` carries).
    storage : bool
        Whether it serves a storage above one batch a worker.
    training : bool
        Whether the training loaders offer it by name (and choose among these on a network).
    predicted : callable or None
        Its predicted time on a network, ``predicted(loads) -> seconds``: by default the network
        layer's function of its name (:data:`coded_shuffle.network.PREDICTIONS`), None if it has
        none.
    aliases : tuple of str
        Old names it still answers to.

    Examples
    --------
    >>> REGISTRY["exchange"].where, REGISTRY["exchange"].ranks(4), REGISTRY["coded"].ranks(4)
    ('both', 4, 5)
    """

    name: str
    factory: Callable[..., Scheme]
    where: str
    master_sends: bool
    coded: bool = False
    storage: bool = False
    training: bool = False
    predicted: Callable[[Loads], float] | None = None
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.where not in WHERE:
            raise ValueError(f"Argument 'where' must be one of {', '.join(WHERE)}, not {self.where!r}.")
        if self.predicted is None:
            object.__setattr__(self, "predicted", PREDICTIONS.get(self.name))

    @property
    def with_master(self) -> bool:
        """Whether it runs in a job with a master."""
        return self.where != "peers"

    @property
    def among_peers(self) -> bool:
        """Whether it runs in a job of peers (no master)."""
        return self.where != "master"

    def ranks(self, K: int) -> int:
        """The ranks a job of this scheme alone needs for ``K`` workers: ``K`` among peers, else ``K + 1``."""
        return K if self.among_peers else K + 1


def _coded(holding: Holding, *, peers: bool, network: Any) -> Scheme:
    return coded_scheme(holding)


def _uncoded(holding: Holding, *, peers: bool, network: Any) -> Scheme:
    return UncodedScheme(holding)


def _exchange(holding: Holding, *, peers: bool, network: Any) -> Scheme:
    return ExchangeScheme(holding, peers=peers, network=network)


def _split(holding: Holding, *, peers: bool, network: Any) -> Scheme:
    if peers or not isinstance(holding, Batches) or holding.pieces != 1:
        raise ValueError(
            "Argument 'mode' 'split' needs a master and one batch a worker of whole records, not "
            f"peers = {peers}, storage = {holding.M}, subpackets = {holding.pieces}."
        )
    return SplitScheme(network, holding)


#: The schemes, a line each, in the order of the ``--mode`` choices; every list of modes is derived
#: from it. A scheme of one's own is one more line (or ``REGISTRY[name] = Registered(name, ...)``).
REGISTRY: dict[str, Registered] = {r.name: r for r in (
    Registered("coded", _coded, "master", True, coded=True, storage=True, training=True),
    Registered("uncoded", _uncoded, "master", True),
    Registered("exchange", _exchange, "both", False, storage=True, training=True,
               aliases=("alltoallv",)),
    Registered("split", _split, "master", True, coded=True),
)}  # fmt: skip


def names(*, aliases: bool = False) -> tuple[str, ...]:
    """The registered schemes' names, in the registry's order (each followed by its old names,
    with ``aliases``).

    Examples
    --------
    >>> names()
    ('coded', 'uncoded', 'exchange', 'split')
    >>> names(aliases=True)
    ('coded', 'uncoded', 'exchange', 'alltoallv', 'split')
    """
    return tuple(n for r in REGISTRY.values() for n in (r.name, *(r.aliases if aliases else ())))


def registered(mode: object, *, name: str = "mode") -> Registered:
    """The registry's entry of scheme ``mode`` (a name, or an old one); raises naming ``name``.

    Examples
    --------
    >>> registered("alltoallv").name
    'exchange'
    """
    if isinstance(mode, str):
        for r in REGISTRY.values():
            if mode == r.name or mode in r.aliases:
                return r
    raise ValueError(f"Argument {name!r} must be one of {', '.join(names())}, not {mode!r}.")


def runs_among_peers(modes: Iterable[str]) -> bool:
    """Whether a job of ``modes`` (registered names) runs among peers: every one of them can.

    Examples
    --------
    >>> runs_among_peers(["exchange"]), runs_among_peers(["coded", "exchange"])
    (True, False)
    """
    return all(registered(m).among_peers for m in modes)


def ranks(modes: Iterable[str], K: int) -> int:
    """The ranks a job of ``modes`` on ``K`` workers needs: ``K`` among peers, else ``K + 1``.

    Examples
    --------
    >>> ranks(["exchange"], 4), ranks(["coded", "uncoded"], 4)
    (4, 5)
    """
    return K if runs_among_peers(modes) else K + 1


def _one_batch() -> dict[str, Any]:
    out = {}
    for r in REGISTRY.values():
        try:
            out[r.name] = r.factory(Batches(), peers=False, network=None)
        except ValueError:  # a scheme that a network sets (a split)
            continue
    return out


#: The schemes by name, as ``--mode`` names them, of one batch a worker (those no network sets).
SCHEMES: dict[str, Any] = _one_batch()


#: The delivery modes a scheme is built for (:data:`REGISTRY`'s names).
MODES = names()


def scheme_for(
    mode: str,
    *,
    K: int,
    storage: int = 1,
    subpackets: int = 1,
    peers: bool = False,
    record_bytes: int | None = None,
    network: Any = None,
    sizes: Any = None,
) -> Scheme:
    """The scheme of delivery ``mode`` on ``K`` workers that store ``storage`` batches each.

    The one factory of schemes: it builds the placement model
    (:func:`~coded_shuffle.engine.holding.holding_for`) and the delivery that serves it, the
    registered factory of ``mode`` (:data:`REGISTRY`). ``peers``: a job without a master, whose
    repairs come from the other holders. ``record_bytes``: the records' size, which sets the
    pieces of a storage. ``network``: the :class:`~coded_shuffle.network.Network` a ``split``
    shares its records on (one that multicasts), and whose racks an ``exchange`` chooses its
    senders on. Raises, naming the argument, a mode it does not know or one that cannot serve
    that storage or job.

    Examples
    --------
    >>> scheme_for("coded", K=4, storage=2)
    StorageScheme(PieceStorage(K=4, M=2, record_bytes=None))
    >>> scheme_for("uncoded", K=4, subpackets=2).pieces
    2
    """
    entry = registered(mode)
    holding = holding_for(K=K, storage=storage, subpackets=subpackets, record_bytes=record_bytes, sizes=sizes)
    scheme = entry.factory(holding, peers=peers, network=network)
    if peers and not entry.among_peers:
        raise ValueError(f"Argument 'peers' must be False for mode {mode!r}: its master holds the records.")
    if isinstance(holding, PieceStorage) and not entry.storage:
        served = " or ".join(repr(r.name) for r in REGISTRY.values() if r.storage)
        raise ValueError(
            f"Argument 'mode' must be {served} with a storage of M = {holding.M} batches, not {mode!r}."
        )
    return scheme


def resolve(
    scheme: object,
    *,
    name: str = "mode",
    K: int,
    storage: int = 1,
    subpackets: int = 1,
    peers: bool = False,
    record_bytes: int | None = None,
    network: Any = None,
    sizes: Any = None,
) -> Scheme:
    """The scheme an argument ``name`` gives: a registered name built by :func:`scheme_for`, or an
    object satisfying :class:`Scheme` used as is (its own placement model: ``storage`` and
    ``subpackets`` then stay at 1 or equal its own); anything else is a TypeError naming ``name``.

    Examples
    --------
    >>> class Mine(UncodedScheme):
    ...     name = "mine"
    >>> resolve(Mine(), K=4).name, resolve("coded", K=4).name
    ('mine', 'coded')
    """
    if isinstance(scheme, str):
        registered(scheme, name=name)  # an unknown name, refused naming the argument
        return scheme_for(scheme, K=K, storage=storage, subpackets=subpackets, peers=peers,
                          record_bytes=record_bytes, network=network, sizes=sizes)  # fmt: skip
    if not isinstance(scheme, Scheme):
        raise TypeError(
            f"Argument {name!r} must be a registered scheme's name or a Scheme, not {type(scheme).__name__}."
        )
    if storage not in (1, scheme.M):
        raise ValueError(f"Argument 'storage' must be 1 or the scheme's own M = {scheme.M}, not {storage!r}.")
    if subpackets not in (1, scheme.pieces):
        raise ValueError(
            f"Argument 'subpackets' must be 1 or the scheme's own {scheme.pieces} pieces, not {subpackets!r}."
        )
    if peers and not scheme.peers:
        raise ValueError(f"Argument {name!r} must be a scheme of peers (peers = True) in a job of peers.")
    return scheme
