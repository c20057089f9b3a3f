"""Each mode's predicted time on a network (:mod:`coded_shuffle.network`): the loads a prediction
reads (:class:`Loads`), each mode's links and their times (:data:`LINKS`), the busiest of them its
time (:data:`PREDICTIONS`), the split's best share (:func:`split_time`), the binding link
(:func:`binding`) and why a mode is chosen (:func:`explain`). Rates in bytes a second, loads in
bytes; :func:`coded_shuffle.network.transition_times` makes the loads of a transition. The order-2
symbols of each pair of workers (:func:`pairs_of`, :func:`scoped_symbols`) say what a snooping
switch sends each downlink; :func:`symbol_bytes` counts a plan's symbols in bytes, records of any sizes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ._checks import check_number
from .matrix import elastic_matrix

if TYPE_CHECKING:
    from .plan import DeliveryPlan

__all__ = [
    "Loads", "TransitionTimes", "PREDICTIONS", "MODES", "LINKS", "SPLIT_MARGIN", "binding", "explain",
    "split_time", "exchange_links", "exchange_seconds", "coded_links", "coded_seconds", "uncoded_links",
    "uncoded_seconds", "split_links", "split_seconds", "pairs_of", "scoped_symbols", "symbol_bytes",
]  # fmt: skip

#: A split is predicted (and chosen) only where it saves at least this share of the time of the
#: faster of its two halves alone: it runs both at once, whose costs besides the bytes (a second
#: data path on every host) the prediction does not count. Measured on namespaced hosts
#: (docs/benchmarks.md): predicted 0.3 % under the coded multicast, the split took 15 % more; 9 to
#: 23 % under, it took 9 to 14 % less.
SPLIT_MARGIN = 0.05


@dataclass(frozen=True)
class TransitionTimes:
    """A transition's lower bound on time, each mode's predicted time (seconds) and the fastest."""

    bound_seconds: float
    predicted_seconds: dict[str, float]
    choice: str
    why: str
    #: The predicted time of the best split (:func:`split_time`, ``--mode split``) where it beats
    #: both the coded broadcast and the exchange alone by :data:`SPLIT_MARGIN`, and the share of the
    #: moved records the master codes in it; None otherwise.
    split_seconds: float | None = None
    split_coded_share: float | None = None
    #: Each mode's binding link, the term of the max its prediction is (:func:`binding`): ``master``
    #: (the master's uplink), ``downlink`` (the busiest worker's), ``uplink`` (the busiest
    #: worker's; ``relays`` where a chain of workers forwards the coded symbols), ``rack-up``,
    #: ``rack-down`` (the busiest rack's uplink to the spine, downlink from it), several joined
    #: by ``=`` where they tie; None for a mode the network cannot run or a split not predicted.
    binding_links: dict[str, str | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: a mode the network cannot run is None."""
        return {
            "time_bound_seconds": self.bound_seconds,
            "predicted_seconds": {
                m: (v if math.isfinite(v) else None) for m, v in self.predicted_seconds.items()
            },
            "choice": self.choice,
            "split_seconds": self.split_seconds,
            "split_coded_share": self.split_coded_share,
            "binding_links": dict(self.binding_links),
        }


class _RackTerms(NamedTuple):
    """A network with racks' terms of a transition: its cuts, each mode's rack links' times and
    the split's rack lines (``coded_shuffle.network._rack_terms``)."""

    cuts: list[float]
    terms: dict[str, dict[str, float]]
    split: dict[str, float]


@dataclass(frozen=True)
class Loads:
    """What each mode's prediction reads of one transition on a network
    (:func:`~coded_shuffle.network.transition_times`): the busiest loads in bytes, ``missing``
    (``max_j d_j``), ``only`` (``max_i o_i``), ``moved`` (``W B``), ``coded`` (the coded symbols)
    and ``heard`` (what the busiest downlink receives of them), and the rates in bytes a second
    (0: the link cannot send); on a network with racks, ``rack`` holds each mode's rack links and
    the split's rack lines.

    Examples
    --------
    >>> x = Loads(100.0, 100.0, 300.0, 150.0, 150.0, master=100.0, up=50.0, down=100.0, multicast=True)
    >>> exchange_seconds(x), coded_seconds(x), uncoded_seconds(x)
    (2.0, 1.5, 3.0)
    """

    missing: float
    only: float
    moved: float
    coded: float
    heard: float
    master: float
    up: float
    down: float
    multicast: bool
    rack: _RackTerms | None = None


def _with_racks(mode: str, links: dict[str, float], x: Loads) -> dict[str, float]:
    """``links`` of a mode that can run (not empty) joined by its rack links' times, if any."""
    if links and x.rack is not None:
        links.update(x.rack.terms.get(mode, {}))
    return links


def _rack_lines(x: Loads) -> dict[str, float]:
    return x.rack.split if x.rack is not None else {}


def _longest(links: Mapping[str, float]) -> float:
    """A delivery's time: its busiest link's (infinite where it has none, a mode it cannot run)."""
    return max(links.values()) if links else math.inf


def exchange_links(x: Loads) -> dict[str, float]:
    """The exchange's links and their times: each worker receives what it misses, the uploads as
    the holders give them (none without worker uplinks)."""
    links = {"downlink": x.missing / x.down, "uplink": x.only / x.up} if x.up else {}
    return _with_racks("exchange", links, x)


def exchange_seconds(x: Loads) -> float:
    """The exchange's predicted time: its busiest link's (:func:`exchange_links`)."""
    return _longest(exchange_links(x))


def coded_links(x: Loads) -> dict[str, float]:
    """The coded broadcast's links: the master's symbols, heard by every worker (without
    multicast, a chain of relays, each worker's uplink forwarding them; none without a master)."""
    if not x.master:
        return {}
    links = {"master": x.coded / x.master, "downlink": x.heard / x.down}
    if not x.multicast:  # a chain's uplinks
        links["relays"] = x.coded / x.up if x.up else math.inf
    return _with_racks("coded", links, x)


def coded_seconds(x: Loads) -> float:
    """The coded broadcast's predicted time: its busiest link's (:func:`coded_links`)."""
    return _longest(coded_links(x))


def uncoded_links(x: Loads) -> dict[str, float]:
    """The uncoded delivery's links: each moved record from the master to its new holder."""
    links = {"master": x.moved / x.master, "downlink": x.missing / x.down} if x.master else {}
    return _with_racks("uncoded", links, x)


def uncoded_seconds(x: Loads) -> float:
    """The uncoded delivery's predicted time: its busiest link's (:func:`uncoded_links`)."""
    return _longest(uncoded_links(x))


def _split(x: Loads) -> tuple[float, float]:
    return split_time(x.coded, x.missing, x.only, master=x.master, up=x.up, down=x.down, multicast=True,
                      heard=x.heard, **_rack_lines(x))  # fmt: skip


def split_seconds(x: Loads) -> float:
    """A split where the master multicasts (:func:`split_time`), infinite unless it beats both its
    ends, the exchange and the coded broadcast, by :data:`SPLIT_MARGIN`."""
    split = _split(x)[1] if x.multicast else math.inf
    beats = split < min(coded_seconds(x), exchange_seconds(x)) * (1 - SPLIT_MARGIN)
    return split if beats else math.inf  # at an end of its shares a split is one of the two


def split_links(x: Loads) -> dict[str, float]:
    """The split's links at its share (the lines of :func:`split_time`), none where no split is
    predicted (:func:`split_seconds`)."""
    if not math.isfinite(split_seconds(x)):
        return {}
    share = _split(x)[0]
    return _split_lines(x.coded, x.missing, x.only, master=x.master, up=x.up, down=x.down, multicast=True,
                        heard=x.heard, share=share, **_rack_lines(x))  # fmt: skip


#: The modes a prediction is made for and the function of each, in the order that breaks ties (a
#: split, which at its ends is the exchange or the coded broadcast, is chosen only where it is
#: faster than both). The engine's registry of schemes names each scheme's function here.
PREDICTIONS = {
    "exchange": exchange_seconds, "coded": coded_seconds, "uncoded": uncoded_seconds, "split": split_seconds,
}  # fmt: skip


#: The modes a prediction is made for, in the order that breaks ties.
MODES = tuple(PREDICTIONS)


#: Each mode's links and their times, of which its prediction is the longest (the binding link).
LINKS = {"exchange": exchange_links, "coded": coded_links, "uncoded": uncoded_links, "split": split_links}


def binding(times: Mapping[str, float]) -> str:
    """The link whose time is the largest of ``times`` (a mode's links,
    :attr:`~coded_shuffle.network.TransitionTimes.binding_links`), those that tie with it (within
    ``1e-9`` of it) joined by ``=``, in their order.

    Examples
    --------
    >>> binding({"master": 2.0, "downlink": 1.0})
    'master'
    >>> binding({"downlink": 1.0, "uplink": 1.0})
    'downlink=uplink'
    """
    top = max(times.values())
    return "=".join(k for k, v in times.items() if v >= top * (1 - 1e-9))


def _split_lines(
    coded: float, missing: float, only: float, *, master: float, up: float, down: float, multicast: bool,
    heard: float | None, share: float, rack_missing: float = 0.0, rack_only: float = 0.0,
    rack_heard: float | None = None, rack_up: float | None = None, rack_down: float | None = None,
) -> dict[str, float]:  # fmt: skip
    """Each link's time in a split of coded share ``share`` (the lines of :func:`split_time`)."""
    a, H = share, coded if heard is None else heard
    inf = math.inf
    lines = {
        "master": a * coded / master if master else (inf if a * coded else 0.0),
        "downlink": (a * H + (1 - a) * missing) / down,
        "uplink": ((1 - a) * only + (0.0 if multicast else a * coded)) / up if up
        else (inf if (1 - a) * only or (a * coded and not multicast) else 0.0),
    }  # fmt: skip
    if rack_up is not None and rack_down is not None:
        Hr = coded if rack_heard is None else rack_heard
        lines["rack-up"] = ((1 - a) * rack_only + (0.0 if multicast else a * coded)) / rack_up
        lines["rack-down"] = (a * Hr + (1 - a) * rack_missing) / rack_down
    return lines


def explain(predicted: Mapping[str, float | None], choice: str) -> str:
    """Why ``choice``: its predicted time against the next fastest mode's (a mode the network
    cannot run, None or infinite, left out).

    Examples
    --------
    >>> explain({"exchange": 0.5, "coded": 0.2, "uncoded": None}, "coded")
    'coded: predicted 0.2 s against exchange 0.5 s'
    """
    if not isinstance(predicted, Mapping):
        raise TypeError(
            f"Argument 'predicted' must be a mapping of modes to seconds, not {type(predicted).__name__}."
        )
    if choice not in predicted:
        raise ValueError(
            f"Argument 'choice' must be a mode of 'predicted' ({', '.join(map(str, predicted))}), "
            f"not {choice!r}."
        )
    seconds = predicted[choice]
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds):
        raise ValueError(
            f"Argument 'predicted' must give 'choice' ({choice}) a finite time, not {seconds!r}."
        )
    rest = sorted((v, m) for m, v in predicted.items() if m != choice and v is not None and math.isfinite(v))
    against = f" against {rest[0][1]} {rest[0][0]:.3g} s" if rest else ""
    return f"{choice}: predicted {predicted[choice]:.3g} s{against}"


def split_time(
    coded: float,
    missing: float,
    only: float,
    *,
    master: float,
    up: float,
    down: float,
    multicast: bool,
    heard: float | None = None,
    rack_missing: float = 0.0,
    rack_only: float = 0.0,
    rack_heard: float | None = None,
    rack_up: float | None = None,
    rack_down: float | None = None,
) -> tuple[float, float]:
    """The least predicted time of a split and its coded share ``a``: the master codes a share
    ``a`` of every group of moved records (``a * coded`` bytes, every worker receiving them all)
    while the workers exchange the rest (each receiving ``(1 - a)`` of what it misses, the busiest
    ``missing`` bytes in all, and uploading ``(1 - a)`` of what only it holds, ``only``). Rates in
    bytes a second (0: the link cannot send); ``heard``: the most of the ``coded`` bytes one
    worker receives (default all of them; fewer where the groups are scoped and the switch
    snoops, :func:`~coded_shuffle.network.scoped_symbols`), ``H`` below. Each link's time is linear in ``a``::

        master: a C / master        downlink: (a H + (1 - a) d) / down
        uplink: ((1 - a) o + (0 if multicast else a C)) / up   (a chain's relays share it)

    so the busiest is convex in ``a`` and least at an end or where two lines cross; ``a = 0`` is
    the exchange alone and ``a = 1`` the coded broadcast. With racks (``rack_up`` and
    ``rack_down``, positive), two lines more: the busiest rack's uplink, ``((1 - a) rack_only +
    (0 if multicast else a C)) / rack_up``, and downlink, ``(a rack_heard + (1 - a) rack_missing)
    / rack_down`` (``rack_heard`` default ``C``: the spine replicates each symbol to every rack).

    Examples
    --------
    The master and the uplinks each carry half: twice as fast as either alone.

    >>> split_time(100.0, 0.0, 100.0, master=1.0, up=1.0, down=1e9, multicast=True)
    (0.5, 50.0)
    """
    coded, missing, only = (
        check_number(v, n) for v, n in ((coded, "coded"), (missing, "missing"), (only, "only"))
    )
    master, up = check_number(master, "master"), check_number(up, "up")
    down = check_number(down, "down", positive=True)
    if not isinstance(multicast, bool):
        raise TypeError(f"Argument 'multicast' must be a bool, not {type(multicast).__name__}.")
    heard = None if heard is None else check_number(heard, "heard")
    inf = math.inf
    lines = [  # (time at a = 0, time at a = 1) of each link
        (0.0, coded / master if master else (inf if coded else 0.0)),
        (missing / down, (coded if heard is None else heard) / down),
        (
            only / up if up else (inf if only else 0.0),
            (0.0 if multicast else coded) / up if up else (inf if coded and not multicast else 0.0),
        ),
    ]
    if rack_up is not None or rack_down is not None:
        ru = check_number(rack_up, "rack_up", positive=True)
        rd = check_number(rack_down, "rack_down", positive=True)
        rm, ro = check_number(rack_missing, "rack_missing"), check_number(rack_only, "rack_only")
        rh = coded if rack_heard is None else check_number(rack_heard, "rack_heard")
        lines += [(ro / ru, (0.0 if multicast else coded) / ru), (rm / rd, rh / rd)]

    def busiest(a: float) -> float:
        return max(lo + (hi - lo) * a if math.isfinite(lo) and math.isfinite(hi) else
                   (lo if a == 0 else hi if a == 1 else inf) for lo, hi in lines)  # fmt: skip

    candidates = {0.0, 1.0}
    for i, (l0, l1) in enumerate(lines):
        for m0, m1 in lines[i + 1 :]:
            if all(map(math.isfinite, (l0, l1, m0, m1))) and (l1 - l0) != (m1 - m0):
                a = (m0 - l0) / ((l1 - l0) - (m1 - m0))
                if 0 < a < 1:
                    candidates.add(a)
    best = min(sorted(candidates), key=busiest)
    return best, busiest(best)


def _moved(S: np.ndarray) -> np.ndarray:
    """Square shuffle matrix ``S`` without its diagonal (the records that stay put)."""
    off = np.array(S, dtype=np.int64)
    np.fill_diagonal(off, 0)
    return off


def pairs_of(S: np.ndarray, given: object = None) -> np.ndarray:
    """The coded plan's order-2 symbols between each pair of workers of square shuffle matrix
    ``S``, symmetric: ``given`` checked (a ``K x K`` matrix of finite non-negative numbers, the
    plan's own, e.g. in bytes), else ``min(S[i][j], S[j][i])`` (the plan's count of them).

    Examples
    --------
    >>> pairs_of(np.array([[0, 2, 1], [3, 0, 0], [1, 0, 0]])).tolist()
    [[0, 2, 1], [2, 0, 0], [1, 0, 0]]
    """
    if given is None:
        off = _moved(S)
        return np.minimum(off, off.T)
    try:
        pairs = np.asarray(given, dtype=np.float64)
    except (TypeError, ValueError):
        pairs = np.full(0, np.nan)
    if pairs.shape != S.shape or not np.isfinite(pairs).all() or (pairs < 0).any():
        raise ValueError(
            f"Argument 'pair_symbols' must be a {S.shape[0]} x {S.shape[0]} matrix of finite non-negative "
            f"numbers (the order-2 symbols of each pair of workers), not {given!r}."
        )
    return pairs


def scoped_symbols(S: object, coded_symbols: float, *, pair_symbols: object = None) -> float:
    """The most coded symbols one worker receives when each goes only to its scoped group
    (:mod:`coded_shuffle.transport.multicast`): the order-2 symbols of its pairs (``pair_symbols``,
    :func:`pairs_of`: by default ``min(S[i][j], S[j][i])`` with each other worker ``i``), and
    every other symbol of the ``coded_symbols`` (those of the leftovers' cycles, read by more
    than two; a point sent alone, read by one, counted too: an upper bound). In bytes where all
    three are (records of any sizes, :func:`symbol_bytes`).

    Examples
    --------
    Three workers each sending the others 30: 60 order-2 symbols per worker of the 90 in all.

    >>> scoped_symbols([[0, 30, 30], [30, 0, 30], [30, 30, 0]], 90)
    60.0
    """
    S = elastic_matrix(S)
    pairs = pairs_of(S, pair_symbols)
    rest = check_number(coded_symbols, "coded_symbols") - float(pairs.sum()) / 2
    return float(pairs.sum(axis=0).max(initial=0)) + max(rest, 0.0)


def symbol_bytes(plan: DeliveryPlan, sizes: np.ndarray) -> tuple[int, np.ndarray]:
    """The bytes of ``plan``'s symbols (a plan of whole records), each as long as the longer of its
    records (``sizes``, bytes each: checked by the caller), and of each pair of workers' order-2
    symbols (``K x K``, symmetric), the two loads of a coded delivery in bytes.

    Examples
    --------
    Records of 5 and 4 bytes move from worker 0 to 1, one of 9 bytes back, one of 1 byte from 1
    to 2 and one of 3 bytes from 2 to 0: the longer of the first two joins the 9 bytes in one
    order-2 symbol of 9 bytes; the other (4 bytes) closes a 3-cycle, two symbols of 4 and 3 bytes.

    >>> from coded_shuffle.orders import placement_from_owner
    >>> from coded_shuffle.plan import plan_delivery
    >>> a, b = placement_from_owner([0, 1, 2, 0, 1], 3), placement_from_owner([1, 2, 0, 1, 0], 3)
    >>> sizes = np.array([5, 1, 3, 4, 9])
    >>> total, pairs = symbol_bytes(plan_delivery(a, b, sizes=sizes), sizes)
    >>> total, pairs.tolist()
    (16, [[0, 9, 0], [9, 0, 0], [0, 0, 0]])
    """
    a, b, _ = plan.transmissions()
    longer = np.maximum(sizes[a], np.where(b >= 0, sizes[np.maximum(b, 0)], 0))
    K = plan.K
    pairs = np.zeros((K, K), dtype=np.int64)
    np.add.at(pairs, (plan.pair_i, plan.pair_j), longer[: plan.pair_x.shape[0]])
    return int(longer.sum()), pairs + pairs.T
