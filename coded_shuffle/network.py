"""Which delivery wins on a network: its rates, a lower bound on a transition's time, and each mode's
predicted time.

A network (:class:`Network`) states, in Mbit/s (``10^6`` bits a second), the master's uplink, every
worker's uplink and downlink, and whether the master's sends reach every worker at once (true
multicast). Its text form, ``SPEC``, is comma-separated parts::

    master=1000,up=100,down=1000,multicast

``down`` is required; ``master`` absent means there is no master to send (a job of peers), ``up``
absent that the workers cannot send each other data. ``snooping`` (with ``multicast``) says that
the switch forwards a multicast group only to the ports that joined it (IGMP snooping), so that
the master's scoped groups (``run --multicast``: a group per pair of workers) spare each
downlink the symbols it does not decode.

Racks: ``racks=4x8`` (4 racks of 8 hosts) or ``racks=8+8+4`` puts the workers under top-of-rack
switches, in the order of their indices (the first 8 in rack 0, ...), joined by a spine;
``rack-up=R`` is each rack's uplink to the spine and ``rack-down=R`` its downlink from it (absent:
``rack-up``'s rate); ``spine-multicast`` says that the spine replicates the master's datagrams to
every rack (needed for ``multicast`` across racks). The master sits outside the racks, on the
spine: every byte it sends a worker crosses that worker's rack downlink. ``racks`` must add up to
the job's workers. For one transition of ``N`` records of ``B`` bytes with shuffle matrix ``S``
(``S[i][j]`` records held by ``i`` and needed by ``j``):

- ``d_j = B sum_{i != j} S[i][j]``, what worker ``j`` misses; ``o_i = B sum_{j != i} S[i][j]``,
  what only ``i`` (and the master) holds that the others need;
- **lower bound**, valid for every scheme the network allows (``proofs/claim_10_network_time.py``):
  the largest of ``d_j / down`` (a worker's downlink carries at least what it misses),
  ``o_i / (up + master)`` (what only ``i`` and the master hold leaves through their uplinks), and,
  when the workers cannot send, ``L B / master`` with ``L`` the genie lower bound on the master's
  load in records (:func:`coded_shuffle.bounds.lower_bound`); with racks also, for each rack
  ``r``, ``In_r / rack-down`` (what its workers need and only workers outside it hold) and
  ``Out_r / (min(rack-up, |r| up) + master)`` (what only its workers hold and others need:
  ``proofs/claim_13_rack_time.py``);
- **predicted** times, each the busiest link's bytes over its rate: ``coded`` (the master's coded
  symbols, every worker receiving them all, or with ``snooping`` those of its groups alone,
  :func:`scoped_symbols`; without multicast a chain of relays, each worker's uplink forwarding
  them), ``uncoded`` (each moved record from the master to its new holder),
  ``exchange`` (each worker receiving what it misses, the uploads as the records' holders give
  them) and, where the master multicasts, ``split`` (the master coding a share of the moved records
  while the workers exchange the rest, at once: :func:`split_time`); with racks each counts its
  bytes on the rack links too (:func:`rack_loads`: the exchange's cross-rack bytes, the master's
  bytes into each rack; the relays of a coded broadcast without multicast a chain in rack order).

:func:`transition_times` returns both and the fastest mode, :data:`MODES` order breaking ties.
Records of any sizes (:func:`predict_bytes`): ``S`` in bytes, the coded symbols each as long as
its longer record, the genie bound weighted by size (``proofs/claim_14_byte_bound.py``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from ._checks import check_int, check_number, check_racks
from ._predictions import (
    LINKS,
    MODES,
    PREDICTIONS,
    SPLIT_MARGIN,
    Loads,
    TransitionTimes,
    _moved,
    _RackTerms,
    _split,
    binding,
    coded_links,
    coded_seconds,
    exchange_links,
    exchange_seconds,
    explain,
    pairs_of,
    scoped_symbols,
    split_links,
    split_seconds,
    split_time,
    symbol_bytes,
    uncoded_links,
    uncoded_seconds,
)
from .matrix import elastic_matrix

__all__ = [
    "Network", "TransitionTimes", "transition_times", "predict", "predict_bytes", "split_time", "split_share",
    "explain", "scoped_symbols", "binding", "rack_loads", "MODES", "SPLIT_MARGIN", "Loads", "PREDICTIONS",
    "LINKS", "exchange_seconds", "coded_seconds", "uncoded_seconds", "split_seconds", "exchange_links",
    "coded_links", "uncoded_links", "split_links",
]  # fmt: skip
_RATES = ("master", "up", "down")
_FLAGS = ("multicast", "snooping")
#: The parts of a SPEC about racks: their text and the field each sets.
_RACK_RATES = {"rack-up": "rack_up", "rack-down": "rack_down"}
_RACK_FLAGS = {"spine-multicast": "spine_multicast"}
_PARTS = "master=R, up=R, down=R, multicast, snooping, racks=NxH, rack-up=R, rack-down=R, spine-multicast"


def _racks(part: str, value: str) -> tuple[int, ...]:
    """The hosts of each rack of ``racks=NxH`` (``N`` racks of ``H``) or ``racks=H+H+...``."""
    count, x, hosts = value.partition("x")
    try:
        sizes = (int(hosts),) * int(count) if x else tuple(int(h) for h in value.split("+"))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise ValueError(
            f"--network: {part}: racks are NxH (N racks of H hosts) or H+H+... (each rack's hosts), "
            "every number at least 1"
        )
    return sizes


def _rate(part: str, value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        raise ValueError(f"--network: {part}: a rate must be a number of Mbit/s, not {value!r}") from None
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"--network: {part}: a rate must be positive and finite, not {value}")
    return rate


@dataclass(frozen=True)
class Network:
    """The rates of a network in Mbit/s, and whether the master multicasts; its racks, if any.

    Every rate given is a positive finite number (a float once made), ``multicast`` needs
    ``master`` and ``snooping`` needs ``multicast``; ``racks`` (hosts a rack, each at least 1)
    needs ``rack_up`` (``rack_down`` defaults to it), the rack fields need ``racks``,
    ``spine_multicast`` needs ``multicast``, and ``multicast`` across racks needs
    ``spine_multicast``: a field that is not is refused, naming it.

    Examples
    --------
    >>> n = Network.parse("master=1000,up=100,down=1000,multicast")
    >>> n.master, n.up, n.down, n.multicast
    (1000.0, 100.0, 1000.0, True)
    >>> str(n)
    'master=1000,up=100,down=1000,multicast'
    >>> r = Network.parse("up=100,down=1000,racks=4x8,rack-up=200")
    >>> r.racks, r.rack_up, r.rack_down, r.workers
    ((8, 8, 8, 8), 200.0, 200.0, 32)
    >>> str(r)
    'up=100,down=1000,racks=4x8,rack-up=200,rack-down=200'
    """

    down: float
    master: float | None = None
    up: float | None = None
    multicast: bool = False
    #: The switch forwards a multicast group only to its members (IGMP snooping).
    snooping: bool = False
    #: The hosts (workers) of each rack, in the order of the workers' indices; None: one switch.
    racks: tuple[int, ...] | None = None
    #: Each rack's uplink to the spine and downlink from it, in Mbit/s (with ``racks``; the
    #: downlink absent: the uplink's rate).
    rack_up: float | None = None
    rack_down: float | None = None
    #: The spine replicates the master's multicast to every rack.
    spine_multicast: bool = False

    def __post_init__(self) -> None:
        """Check every field, naming it; the rates become floats (as :meth:`parse` makes them)."""
        for name in _RATES:
            value = getattr(self, name)
            if value is not None or name == "down":
                rate = check_number(value, name, positive=True, unit=" of Mbit/s")
                object.__setattr__(self, name, rate)
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"Argument {name!r} must be a bool, not {type(getattr(self, name)).__name__}."
                )
        if self.multicast and self.master is None:
            raise ValueError(
                "Argument 'master' must be a rate with multicast=True (the master multicasts), not None."
            )
        if self.snooping and not self.multicast:
            raise ValueError(
                "Argument 'snooping' must be False without multicast (it says where the groups go)."
            )
        self._check_racks()

    def _check_racks(self) -> None:
        """The rack fields: sizes of at least one host, rates with racks alone, a replicating spine
        under a multicast that crosses racks."""
        if self.racks is None:
            for name in ("rack_up", "rack_down", "spine_multicast"):
                if getattr(self, name) is not None and getattr(self, name) is not False:
                    raise ValueError(f"Argument {name!r} applies with racks only, not racks=None.")
            return
        if isinstance(self.racks, str) or not all(
            isinstance(h, numbers.Integral) and not isinstance(h, bool) for h in self.racks
        ):
            raise TypeError(
                f"Argument 'racks' must be a sequence of ints (hosts a rack), not {self.racks!r}."
            )
        racks = tuple(int(h) for h in self.racks)
        if not racks or min(racks) < 1:
            raise ValueError(f"Argument 'racks' must be hosts a rack, each at least 1, not {racks}.")
        object.__setattr__(self, "racks", racks)
        up = check_number(self.rack_up, "rack_up", positive=True, unit=" of Mbit/s")
        down = up if self.rack_down is None else self.rack_down
        object.__setattr__(self, "rack_up", up)
        down = check_number(down, "rack_down", positive=True, unit=" of Mbit/s")
        object.__setattr__(self, "rack_down", down)
        if not isinstance(self.spine_multicast, bool):
            raise TypeError(
                f"Argument 'spine_multicast' must be a bool, not {type(self.spine_multicast).__name__}."
            )
        if self.spine_multicast and not self.multicast:
            raise ValueError("Argument 'spine_multicast' must be False without multicast.")
        if self.multicast and len(racks) > 1 and not self.spine_multicast:
            raise ValueError(
                "Argument 'spine_multicast' must be True with multicast across racks (the spine "
                "replicates the master's datagrams), not False."
            )

    @property
    def workers(self) -> int | None:
        """The hosts of the racks in all (the job's workers), or None without racks."""
        return None if self.racks is None else sum(self.racks)

    @property
    def racks_part(self) -> str | None:
        """The SPEC's part of the racks, ``racks=NxH`` or ``racks=H+H+...``; None without racks."""
        return None if self.racks is None else f"racks={_racks_text(self.racks)}"

    def rack_of(self) -> np.ndarray:
        """Each worker's rack (``racks`` in the order of the workers); one rack without racks.

        Examples
        --------
        >>> Network.parse("up=1,down=1,racks=2+1,rack-up=1").rack_of().tolist()
        [0, 0, 1]
        """
        sizes = (0,) if self.racks is None else self.racks
        return np.repeat(np.arange(len(sizes)), sizes)

    def check_workers(self, K: int, *, name: str = "network") -> Network:
        """This network, if its racks hold ``K`` workers in all (or it has none); ValueError
        naming ``name`` otherwise.

        Examples
        --------
        >>> Network.parse("up=1,down=1,racks=2x4,rack-up=1").check_workers(6)
        Traceback (most recent call last):
        ...
        ValueError: Argument 'network' must have racks of K = 6 hosts in all, not 8 (racks=2x4).
        """
        if self.racks is not None and sum(self.racks) != K:
            raise ValueError(
                f"Argument {name!r} must have racks of K = {K} hosts in all, not {sum(self.racks)} "
                f"({self.racks_part})."
            )
        return self

    @classmethod
    def parse(cls, spec: str) -> Network:
        """The network of ``spec`` (module docstring); ValueError naming the part at fault."""
        if not isinstance(spec, str):
            raise TypeError(f"Argument 'spec' must be a str, not {type(spec).__name__}.")
        if not spec.strip():
            raise ValueError("--network: an empty SPEC; say at least down=R (Mbit/s)")
        rates: dict[str, float] = {}
        flags: set[str] = set()
        racks: tuple[int, ...] | None = None
        for part in (p.strip() for p in spec.split(",")):
            key, eq, value = part.partition("=")
            if part in _FLAGS or part in _RACK_FLAGS:
                if part in flags:
                    raise ValueError(f"--network: {part} given twice")
                flags.add(part)
            elif eq and key == "racks":
                if racks is not None:
                    raise ValueError("--network: racks given twice")
                racks = _racks(part, value)
            elif not eq or key not in (*_RATES, *_RACK_RATES):
                raise ValueError(f"--network: {part!r}: not a part of a SPEC ({_PARTS})")
            elif key in rates:
                raise ValueError(f"--network: {key} given twice")
            else:
                rates[key] = _rate(part, value)
        if "down" not in rates:
            raise ValueError("--network: no down=R: every worker's downlink rate is needed")
        multicast, snooping = "multicast" in flags, "snooping" in flags
        if multicast and "master" not in rates:
            raise ValueError("--network: multicast needs master=R (the master's multicast rate)")
        if snooping and not multicast:
            raise ValueError("--network: snooping needs multicast (it says where the groups go)")
        spine = "spine-multicast" in flags
        if racks is None:
            for part in (*_RACK_RATES, "spine-multicast"):
                if part in rates or part in flags:
                    raise ValueError(f"--network: {part} needs racks=NxH (the racks it is about)")
        elif "rack-up" not in rates:
            raise ValueError("--network: racks need rack-up=R (each rack's uplink to the spine)")
        if spine and not multicast:
            raise ValueError(
                "--network: spine-multicast needs multicast (the master's datagrams it replicates)"
            )
        if multicast and racks is not None and len(racks) > 1 and not spine:
            raise ValueError(
                "--network: multicast across racks needs spine-multicast: a spine that does not "
                "replicate the master's datagrams delivers them to one rack"
            )
        return cls(
            down=rates["down"], master=rates.get("master"), up=rates.get("up"), multicast=multicast,
            snooping=snooping, racks=racks, rack_up=rates.get("rack-up"), rack_down=rates.get("rack-down"),
            spine_multicast=spine,
        )  # fmt: skip

    def __str__(self) -> str:
        parts = [f"{k}={getattr(self, k):g}" for k in _RATES if getattr(self, k) is not None]
        parts += [f for f in _FLAGS if getattr(self, f)]
        if self.racks is not None:
            parts.append(f"racks={_racks_text(self.racks)}")
            parts += [f"{k}={getattr(self, f):g}" for k, f in _RACK_RATES.items()]
            parts += [k for k, f in _RACK_FLAGS.items() if getattr(self, f)]
        return ",".join(parts)


def _racks_text(racks: tuple[int, ...]) -> str:
    """``racks`` as a SPEC writes them: ``NxH`` where every rack has ``H`` hosts, else ``H+H+...``."""
    return f"{len(racks)}x{racks[0]}" if len(set(racks)) == 1 else "+".join(map(str, racks))


def _bytes_per_second(mbit: float | None) -> float:
    return 0.0 if mbit is None else mbit * 1e6 / 8


def _check_network(network: object) -> Network:
    if not isinstance(network, Network):
        raise TypeError(f"Argument 'network' must be a Network, not {type(network).__name__}.")
    return network


def transition_times(
    S: object, *, record_bytes: int, network: Network, coded_symbols: float, lower_bound_symbols: float,
    pair_symbols: object = None,
) -> TransitionTimes:  # fmt: skip
    """The bound and the predictions of the module docstring for shuffle matrix ``S`` (``K_t x
    K_{t+1}`` when the number of workers changes: :func:`~coded_shuffle.matrix.elastic_matrix`
    of it), records of ``record_bytes`` bytes, the coded plan's ``coded_symbols`` and the genie
    lower bound's ``lower_bound_symbols`` (both in records, non-negative); ``pair_symbols``, the
    plan's order-2 symbols between each pair of workers (default ``min(S[i][j], S[j][i])``),
    what a snooping switch sends each downlink. Records of any sizes: ``S`` in bytes
    (``record_bytes=1``) and the symbols' bytes (:func:`predict_bytes`).

    Examples
    --------
    Two workers swapping one record each on a switch: the exchange meets the bound.

    >>> t = transition_times([[0, 1], [1, 0]], record_bytes=125_000, network=Network.parse("up=1,down=1"),
    ...                      coded_symbols=1, lower_bound_symbols=1)
    >>> t.bound_seconds, t.predicted_seconds["exchange"], t.choice
    (1.0, 1.0, 'exchange')
    """
    S = elastic_matrix(S)
    B = check_int(record_bytes, "record_bytes", minimum=1)
    network = _check_network(network)
    coded = check_number(coded_symbols, "coded_symbols")
    lb = check_number(lower_bound_symbols, "lower_bound_symbols")
    if network.racks is not None:
        network.check_workers(S.shape[0])
    d, o, W = _loads(S, B)
    master, up, down = (_bytes_per_second(r) for r in (network.master, network.up, network.down))
    cuts = [d / down]
    if master + up > 0:
        cuts.append(o / (master + up))
    if up == 0 and master > 0:
        cuts.append(lb * B / master)
    coded_b = coded * B
    # what the busiest downlink carries of the coded symbols: all, or with snooping its groups'
    pairs = pairs_of(S, pair_symbols)
    heard_b = scoped_symbols(S, coded, pair_symbols=pairs) * B if network.snooping else coded_b
    rack = _rack_terms(S, B, network, coded, pairs) if network.racks is not None else None
    if rack is not None:
        cuts += rack.cuts
    return times_of(Loads(d, o, W, coded_b, heard_b, master, up, down, network.multicast, rack), cuts)


def times_of(loads: Loads, cuts: list[float], modes: tuple[str, ...] = MODES) -> TransitionTimes:
    """The :class:`TransitionTimes` of ``loads``: each mode of ``modes`` predicted (the others
    ``inf``: they cannot run), the fastest chosen (ties to the earlier of :data:`MODES`), the
    bound the largest of ``cuts`` (each a link's time no delivery beats). Raises when no mode can
    deliver."""
    predicted = {m: PREDICTIONS[m](loads) if m in modes else math.inf for m in MODES}
    choice = min(MODES, key=lambda m: predicted[m])
    if math.isinf(predicted[choice]):
        raise ValueError("--network: no mode can deliver on it: give master=R or up=R")
    why = explain(predicted, choice)
    split = predicted["split"]
    share = _split(loads)[0] if math.isfinite(split) else None
    links = {m: binding(LINKS[m](loads)) if math.isfinite(predicted[m]) else None for m in MODES}
    split_or_none = split if share is not None else None
    return TransitionTimes(max(cuts), predicted, choice, why, split_or_none, share, links)


def rack_loads(S: object, *, racks: object) -> dict[str, list[int]]:
    """What crosses each rack's links in a transition of shuffle matrix ``S`` (square, in records),
    the workers in ``racks`` (hosts a rack, in the order of the workers): ``into[r]``, the records
    that workers of rack ``r`` need and only workers outside it hold (its downlink's in an
    exchange); ``out_of[r]``, those only its workers hold and workers outside it need (its
    uplink's); ``moved_in[r]``, every record that moves to a worker of it (its downlink's from the
    master, who sits outside the racks).

    Examples
    --------
    Workers 0 and 1 in one rack, 2 in another; 0 and 1 swap one record, 1 sends 2 two.

    >>> rack_loads([[0, 1, 0], [1, 0, 2], [0, 0, 0]], racks=(2, 1))
    {'into': [0, 2], 'out_of': [2, 0], 'moved_in': [2, 2]}
    """
    off = _moved(elastic_matrix(S))
    sizes = check_racks(racks, off.shape[0])
    if sizes is None:
        raise TypeError("Argument 'racks' must be a sequence of ints (hosts a rack), not None.")
    rack = np.repeat(np.arange(len(sizes)), sizes)
    by = np.zeros((len(sizes), len(sizes)), dtype=np.int64)  # records from rack to rack
    np.add.at(by, (rack[:, None], rack[None, :]), off)
    cross = by - np.diag(np.diag(by))
    return {
        "into": [int(v) for v in cross.sum(axis=0)],
        "out_of": [int(v) for v in cross.sum(axis=1)],
        "moved_in": [int(v) for v in by.sum(axis=0)],
    }


def _rack_heard(
    S: np.ndarray, coded_symbols: float, rack: np.ndarray, pairs: np.ndarray | None = None
) -> float:
    """The most coded symbols one rack's downlink carries when each goes only to its scoped group
    (:func:`scoped_symbols` for a rack: the pairs with a member in it, and every other symbol)."""
    pairs = pairs_of(S, pairs)
    rest = max(coded_symbols - float(pairs.sum()) / 2, 0.0)
    most = 0.0
    for r in range(int(rack.max(initial=0)) + 1):
        inside = rack == r
        touching = np.triu(inside[:, None] | inside[None, :], 1)
        most = max(most, float(pairs[touching].sum()))
    return most + rest


def _rack_terms(
    S: np.ndarray, B: int, network: Network, coded: float, pairs: np.ndarray | None = None
) -> _RackTerms:
    """The cuts, each mode's rack links' times and the split's rack lines of :func:`transition_times`
    on a network with racks (rates in bytes a second)."""
    assert network.racks is not None
    loads = rack_loads(S, racks=network.racks)
    into, out, moved_in = (max(loads[k], default=0) * B for k in ("into", "out_of", "moved_in"))
    master, up = _bytes_per_second(network.master), _bytes_per_second(network.up)
    ru, rd = _bytes_per_second(network.rack_up), _bytes_per_second(network.rack_down)
    cuts = [into / rd]
    for r, h in enumerate(network.racks):  # what only rack r (and the master) holds leaves it
        if min(ru, h * up) + master > 0:
            cuts.append(loads["out_of"][r] * B / (min(ru, h * up) + master))
    coded_b = coded * B
    several = len(network.racks) > 1
    heard = _rack_heard(S, coded, network.rack_of(), pairs) * B if network.snooping else coded_b
    terms = {
        "exchange": {"rack-up": out / ru, "rack-down": into / rd},
        # multicast: the spine replicates, each rack's downlink carries a symbol once; else a
        # chain of relays in rack order enters every rack once and leaves all but the last once
        "coded": {"rack-down": heard / rd} if network.multicast
        else {"rack-down": coded_b / rd, **({"rack-up": coded_b / ru} if several else {})},
        "uncoded": {"rack-down": moved_in / rd},
    }  # fmt: skip
    split = {"rack_missing": into, "rack_only": out, "rack_heard": heard, "rack_up": ru, "rack_down": rd}
    return _RackTerms(cuts, terms, split)


def _loads(S: np.ndarray, B: int) -> tuple[float, float, float]:
    """``(max_j d_j, max_i o_i, W B)`` of shuffle matrix ``S`` in bytes of records of ``B`` bytes."""
    off = _moved(S)
    d, o = off.sum(axis=0).max(initial=0), off.sum(axis=1).max(initial=0)
    return float(d) * B, float(o) * B, float(off.sum()) * B


def split_share(S: object, *, network: Network) -> float:
    """The share ``a`` of every group of moved records that the master codes in the best split of
    shuffle matrix ``S`` on ``network`` (:func:`split_time`; the coded load of the greedy plan), the
    one number every rank of a split computes alike from ``S``. ``network`` must multicast: only
    there do the master's sends and the workers' exchange run at once.

    Examples
    --------
    >>> S = [[0, 30, 30], [30, 0, 30], [30, 30, 0]]
    >>> round(split_share(S, network=Network.parse("master=1000,up=100,down=1000,multicast")), 3)
    0.857
    """
    from .plan import rates

    if not _check_network(network).multicast:
        raise ValueError(f"Argument 'network' must be a Network that multicasts, not {network}.")
    S = elastic_matrix(S)
    d, o, _ = _loads(S, 1)
    master, up, down = (_bytes_per_second(r) for r in (network.master, network.up, network.down))
    coded = float(rates(S).coded)
    heard = scoped_symbols(S, coded) if network.snooping else coded
    lines: dict[str, float] = {}
    if network.racks is not None:
        network.check_workers(S.shape[0])
        lines = _rack_terms(S, 1, network, coded).split
    share, _ = split_time(coded, d, o, master=master, up=up, down=down, multicast=True, heard=heard,
                          **lines)  # type: ignore[arg-type]  # fmt: skip
    return share


def predict(S: object, *, record_bytes: int, network: Network, strategy: str = "greedy") -> TransitionTimes:
    """:func:`transition_times` of shuffle matrix ``S``, with the coded load and the lower bound
    computed here (:func:`~coded_shuffle.plan.rates`, :func:`~coded_shuffle.bounds.lower_bound`):
    what ``--mode auto`` chooses from before a job starts.

    Examples
    --------
    On a switch the exchange wins; where one transmission reaches every worker and the workers'
    uplinks are slow, the coded multicast does, and sooner still with the workers exchanging a
    share of the records beside it.

    >>> S = [[0, 30, 30], [30, 0, 30], [30, 30, 0]]
    >>> predict(S, record_bytes=1000, network=Network.parse("master=1000,up=1000,down=1000")).choice
    'exchange'
    >>> t = predict(S, record_bytes=1000, network=Network.parse("master=1000,up=200,down=1000,multicast"))
    >>> t.choice, t.predicted_seconds["coded"] > t.predicted_seconds["split"]
    ('split', True)
    """
    from .bounds import lower_bound
    from .plan import rates

    check_int(record_bytes, "record_bytes", minimum=1)
    _check_network(network)  # both before the plan, which may take a while
    r = rates(S, strategy=strategy)
    return transition_times(
        S, record_bytes=record_bytes, network=network, coded_symbols=float(r.coded),
        lower_bound_symbols=int(lower_bound(S).value),
    )  # fmt: skip


def predict_bytes(
    placement_t: object, placement_t1: object, *, sizes: object, network: Network, strategy: str = "greedy"
) -> TransitionTimes:  # fmt: skip
    """:func:`predict` of records of any sizes (``sizes``, the bytes of each), every link's load in
    bytes: those of the shuffle matrix in bytes ``S_B`` (what each worker misses, what only one
    holds, what moves), the coded plan's that pairs records of similar sizes (the engine's, each
    symbol as long as its longer record; :func:`~coded_shuffle._predictions.symbol_bytes`, with
    each pair of workers' order-2 symbols) and the genie bound weighted by size
    (``proofs/claim_14_byte_bound.py`` (e)).

    Examples
    --------
    A swap of records of 250,000 and 125,000 bytes on links of 1 Mbit/s (125,000 bytes a second):
    the exchange's busiest link and the one coded symbol carry 250,000 bytes.

    >>> from coded_shuffle.orders import placement_from_owner
    >>> a, b = placement_from_owner([0, 1], 2), placement_from_owner([1, 0], 2)
    >>> t = predict_bytes(a, b, sizes=[250_000, 125_000], network=Network.parse("master=1,up=1,down=1"))
    >>> t.bound_seconds, t.predicted_seconds["exchange"], t.predicted_seconds["coded"]
    (2.0, 2.0, 2.0)
    """
    from .bounds import lower_bound
    from .matrix import shuffle_matrix
    from .plan import plan_delivery

    S_B = shuffle_matrix(placement_t, placement_t1, sizes=sizes)  # type: ignore[arg-type]  # checks all three
    d = np.asarray(sizes, dtype=np.int64)
    plan = plan_delivery(placement_t, placement_t1, strategy=strategy, sizes=d)  # type: ignore[arg-type]
    coded, pairs = symbol_bytes(plan, d)
    return transition_times(S_B, record_bytes=1, network=network, coded_symbols=coded,
                            lower_bound_symbols=lower_bound(S_B).value, pair_symbols=pairs)  # fmt: skip
