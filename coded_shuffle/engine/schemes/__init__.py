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
"""

from __future__ import annotations

from typing import Any

from ..holding import PieceStorage, holding_for
from ._base import Encoded, Given, Planned, Scheme, SchemeBase, Taken, Tamper, receive_decode, send
from .coded import CodedScheme, UncodedScheme, uncoded_frames
from .exchange import ExchangeScheme
from .split import SplitScheme, split_placements
from .storage import StorageScheme, coded_scheme

__all__ = [
    "Planned", "Encoded", "Given", "Taken", "Scheme", "SchemeBase", "CodedScheme", "UncodedScheme",
    "ExchangeScheme", "SplitScheme", "split_placements",
    "StorageScheme", "SCHEMES", "MODES", "scheme_for", "send", "uncoded_frames", "receive_decode", "Tamper",
]  # fmt: skip

#: The schemes by name, as ``--mode`` names them.
SCHEMES: dict[str, Any] = {
    "coded": CodedScheme(),
    "uncoded": UncodedScheme(),
    "exchange": ExchangeScheme(),
}


#: The delivery modes a scheme is built for, and the old names they still answer to.
MODES = ("coded", "uncoded", "exchange", "split")
_ALIASES = {"alltoallv": "exchange"}


def scheme_for(
    mode: str,
    *,
    K: int,
    storage: int = 1,
    subpackets: int = 1,
    peers: bool = False,
    record_bytes: int | None = None,
    network: Any = None,
) -> Scheme:
    """The scheme of delivery ``mode`` on ``K`` workers that store ``storage`` batches each.

    The one factory of schemes: it builds the placement model
    (:func:`~coded_shuffle.engine.holding.holding_for`) and the delivery that serves it, the
    coded plan of :mod:`coded_shuffle.storage` above one batch. ``peers``: a job without a
    master (the exchange alone), whose repairs come from the other holders. ``record_bytes``: the
    records' size, which sets the pieces of a storage. ``network``: the
    :class:`~coded_shuffle.network.Network` a ``split`` shares its records on (one that
    multicasts), and whose racks an ``exchange`` chooses its senders on. Raises, naming the
    argument, a mode it does not know or one that cannot serve that storage.

    Examples
    --------
    >>> scheme_for("coded", K=4, storage=2)
    StorageScheme(PieceStorage(K=4, M=2, record_bytes=None))
    >>> scheme_for("uncoded", K=4, subpackets=2).pieces
    2
    """
    mode = _ALIASES.get(mode, mode) if isinstance(mode, str) else mode
    if mode not in MODES:
        raise ValueError(f"Argument 'mode' must be one of {', '.join(MODES)}, not {mode!r}.")
    holding = holding_for(K=K, storage=storage, subpackets=subpackets, record_bytes=record_bytes)
    if mode == "split":
        if peers or storage != 1 or subpackets != 1:
            raise ValueError(
                "Argument 'mode' 'split' needs a master and one batch a worker of whole records, not "
                f"peers = {peers}, storage = {storage}, subpackets = {subpackets}."
            )
        return SplitScheme(network, holding)
    if mode == "exchange":
        return ExchangeScheme(holding, peers=peers, network=network)
    if peers:
        raise ValueError(f"Argument 'peers' must be False for mode {mode!r}: its master holds the records.")
    if mode == "uncoded" and isinstance(holding, PieceStorage):
        raise ValueError(
            f"Argument 'mode' must be 'coded' or 'exchange' with a storage of M = {holding.M} batches, "
            f"not {mode!r}."
        )
    return coded_scheme(holding) if mode == "coded" else UncodedScheme(holding)
