"""A transition's deliveries replayed on SimGrid, the flow-level simulator of distributed systems.

Each mode's plan becomes transfers with their bytes and their order (:func:`transfer_plans`),
which :func:`replay` runs on a SimGrid platform of the network's topology and times:

- ``exchange``: the senders of :func:`~coded_shuffle.plan.assign_senders` (with one batch a
  worker every missing record has one holder, which sends it), grouped by pair, in the rounds of
  :func:`~coded_shuffle.plan.exchange_rounds` (``schedule="rounds"``: each a matching, the next
  when all its transfers have ended) or every pair at once (``"at-once"``: ``K^2`` flows sharing
  the links, a fluid simulator's costly case: small ``K`` only);
- ``coded``: the master's coded symbols, one multicast where the network multicasts (with
  ``snooping``, each worker's downlink carrying the symbols of its groups alone,
  :func:`~coded_shuffle.network.scoped_symbols`), else a pipelined chain of relays, the master to
  worker 0 to worker 1 ..., in pieces of ``chunk_bytes`` (a step a piece a hop, as MPICH's
  chain broadcast forwards them);
- ``uncoded``: the master's unicasts, every worker's records at once;
- ``split``: where a split is predicted, the master's multicast of its share of the coded symbols
  while the workers exchange the rest in rounds, both at once.

The platform: a star of one switch (every host an uplink and a downlink of the SPEC's rates), or,
with :class:`Racks`, workers in racks under a switch each, every rack joined to the core switch by
an uplink and a downlink of their own rates (a two-level fat tree; the master on the core), the
core and each rack's switch replicating the master's multicast. Every link has ``latency``
seconds. SimGrid runs in a process of its own (:mod:`._simgrid`): Debian's ``python3-simgrid``
(3.32, a build for CPython 3.11 found in :data:`~._simgrid.DEBIAN_DIST_PACKAGES` when the
interpreter's path does not have it) or PyPI's ``simgrid``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int, check_number
from ..matrix import elastic_matrix
from ..network import Network, split_share
from ..plan import assign_senders, exchange_rounds, lone_holders, rates
from ._simgrid import DEBIAN_DIST_PACKAGES

__all__ = ["Racks", "ReplayResult", "SCHEDULES", "replay", "transfer_plans", "simgrid_available"]

#: How the exchange's transfers are ordered: in rounds of matchings, or every pair at once.
SCHEDULES = ("rounds", "at-once")
_SCRIPT = Path(__file__).with_name("_simgrid.py")


@dataclass(frozen=True)
class Racks:
    """Workers in racks of ``hosts`` (the last rack may hold fewer), each rack's switch joined to
    the core by an uplink of ``up`` and a downlink of ``down`` Mbit/s.

    Examples
    --------
    Racks of 16 hosts of 1000 Mbit/s ports, oversubscribed 4:1:

    >>> Racks(hosts=16, up=4000, down=4000)
    Racks(hosts=16, up=4000.0, down=4000.0)
    """

    hosts: int
    up: float
    down: float

    def __post_init__(self) -> None:
        check_int(self.hosts, "hosts", minimum=1)
        for name in ("up", "down"):
            object.__setattr__(
                self, name, check_number(getattr(self, name), name, positive=True, unit=" of Mbit/s")
            )


@dataclass(frozen=True)
class ReplayResult:
    """The simulated seconds of each mode replayed, with the inputs.

    ``simulated_seconds`` holds the modes the network runs (a split only where one is predicted);
    ``flows``: the transfers SimGrid ran; ``wall_seconds``: the simulation's own time.
    """

    K: int
    record_bytes: int
    network: Network
    racks: Racks | None
    latency: float
    schedule: str
    simulated_seconds: dict[str, float] = field(default_factory=dict)
    flows: int = 0
    wall_seconds: float = 0.0

    @property
    def fastest(self) -> str:
        """The mode of least simulated time."""
        return min(self.simulated_seconds, key=lambda m: self.simulated_seconds[m])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        racks = (
            None
            if self.racks is None
            else {"hosts": self.racks.hosts, "up": self.racks.up, "down": self.racks.down}
        )
        return {
            "K": self.K, "record_bytes": self.record_bytes, "network": str(self.network), "racks": racks,
            "latency_seconds": self.latency, "exchange_schedule": self.schedule,
            "simulated_seconds": dict(self.simulated_seconds), "simulated_fastest": self.fastest,
            "flows": self.flows, "simulation_wall_seconds": self.wall_seconds,
        }  # fmt: skip


def simgrid_available() -> bool:
    """Whether SimGrid's Python module can be imported (on the path, or Debian's package).

    Examples
    --------
    >>> isinstance(simgrid_available(), bool)
    True
    """
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    return (
        find_spec("simgrid") is not None
        or PathFinder.find_spec("simgrid", [DEBIAN_DIST_PACKAGES]) is not None
    )


def _demand(S: np.ndarray) -> np.ndarray:
    """Units from each worker to each other: the holders' assignment (one holder a record)."""
    K = S.shape[0]
    off = S.copy()
    np.fill_diagonal(off, 0)
    i, j = np.nonzero(off)
    counts = off[i, j]
    wanter = np.repeat(j, counts)
    holders = lone_holders(np.repeat(i, counts), K=K)
    a = assign_senders(wanter, holders, K=K)
    return np.bincount(a.sender * K + wanter, minlength=K * K).reshape(K, K).astype(np.int64)


def _flows(transfers: list[tuple[int, int, float]]) -> dict[str, list[list[float]]]:
    src, dst, size = (list(x) for x in zip(*transfers, strict=True)) if transfers else ([], [], [])
    return {"flows": [src, dst, size]}


def _exchange_steps(D: np.ndarray, B: int, schedule: str) -> list[dict[str, Any]]:
    if schedule == "at-once":
        i, j = np.nonzero(D)
        return [_flows([(int(a), int(b), float(D[a, b]) * B) for a, b in zip(i, j, strict=True)])]
    return [_flows([(s, r, float(n) * B) for s, (r, n) in rnd.items()]) for rnd in exchange_rounds(D)]


def _chain_steps(total: float, K: int, chunk: int) -> list[dict[str, Any]]:
    """A pipelined chain: piece ``f`` crosses hop ``h`` (node ``h - 1`` to ``h``, the master
    ``-1``) in step ``f + h``."""
    if total <= 0:
        return []
    pieces = [float(chunk)] * int(total // chunk) + ([total % chunk] if total % chunk else [])
    F = len(pieces)
    return [
        _flows([(h - 1, h, pieces[s - h]) for h in range(max(0, s - F + 1), min(K, s + 1))])
        for s in range(F + K - 1)
    ]


def transfer_plans(
    S: object, *, record_bytes: int, network: Network, schedule: str = "rounds", chunk_bytes: int = 1 << 16,
    strategy: str = "greedy",
) -> dict[str, list[list[dict[str, Any]]]]:  # fmt: skip
    """Each mode's transfers for shuffle matrix ``S`` (square, one batch a worker), records of
    ``record_bytes``, on ``network``: ``{mode: [track, ...]}``, the tracks of a mode running at
    once, each a list of steps run in order (the module docstring; the format :mod:`._simgrid`
    reads). A mode the network cannot run is left out.

    Examples
    --------
    Two workers swapping one record each, by their uplinks, in one round:

    >>> p = transfer_plans([[0, 1], [1, 0]], record_bytes=100, network=Network.parse("up=1,down=1"))
    >>> p
    {'exchange': [[{'flows': [[0, 1], [1, 0], [100.0, 100.0]]}]]}
    """
    S = elastic_matrix(S)
    B = check_int(record_bytes, "record_bytes", minimum=1)
    chunk = check_int(chunk_bytes, "chunk_bytes", minimum=1)
    if not isinstance(network, Network):
        raise TypeError(f"Argument 'network' must be a Network, not {type(network).__name__}.")
    if schedule not in SCHEDULES:
        raise ValueError(f"Argument 'schedule' must be one of {', '.join(SCHEDULES)}, not {schedule!r}.")
    K = S.shape[0]
    off = S.copy()
    np.fill_diagonal(off, 0)
    plans: dict[str, list[list[dict[str, Any]]]] = {}
    D = _demand(S) if network.up is not None else None
    if D is not None:
        plans["exchange"] = [_exchange_steps(D, B, schedule)]
    if network.master is None:
        return plans
    coded = float(rates(S, strategy=strategy).coded) * B
    pairs = np.minimum(off, off.T)
    rest = max(coded / B - float(pairs.sum()) / 2, 0.0)
    # with snooping, each worker's groups: its pairs' order-2 symbols and every other symbol (the
    # per-worker terms of network.scoped_symbols, which is their largest)
    heard = ((pairs.sum(axis=0) + rest) * B).tolist() if network.snooping else [coded] * K
    if network.multicast:
        plans["coded"] = [[{"multicast": coded, "heard": heard}]]
    elif network.up is not None:
        plans["coded"] = [_chain_steps(coded, K, chunk)]
    plans["uncoded"] = [[_flows([(-1, j, float(off[:, j].sum()) * B) for j in range(K) if off[:, j].any()])]]
    if network.multicast and D is not None:
        from ..network import predict

        t = predict(S, record_bytes=B, network=network, strategy=strategy)
        if t.split_seconds is not None and math.isfinite(t.split_seconds):
            a = split_share(S, network=network)
            rest_D = np.rint((1 - a) * D).astype(np.int64)
            plans["split"] = [
                [{"multicast": a * coded, "heard": [a * h for h in heard]}],
                _exchange_steps(rest_D, B, "rounds"),
            ]
    return plans


def replay(
    S: object, *, record_bytes: int, network: Network, racks: Racks | None = None, latency: float = 1e-5,
    schedule: str = "rounds", chunk_bytes: int = 1 << 16, strategy: str = "greedy",
    timeout: float | None = None,
) -> ReplayResult:  # fmt: skip
    """Replay each mode's transfers (:func:`transfer_plans`) of shuffle matrix ``S`` on SimGrid
    and return their simulated seconds.

    Parameters
    ----------
    S : array_like
        The shuffle matrix (one batch a worker).
    record_bytes : int
        Bytes a record.
    network : Network
        The rates (Mbit/s) of the master's uplink and the workers' uplinks and downlinks, and
        whether the master multicasts (and the switch snoops).
    racks : Racks, optional
        Workers in racks under a core switch; None: one switch.
    latency : float
        Seconds a link (default 10 us).
    schedule : str
        The exchange's order, one of :data:`SCHEDULES`.
    timeout : float, optional
        Seconds to let SimGrid run before giving up (``subprocess.TimeoutExpired``).

    Raises
    ------
    ModuleNotFoundError
        Without SimGrid's Python module.

    Examples
    --------
    One record of 125 kB from each of two workers to the other, on ports of 1 Mbit/s: one round
    of 1 s, plus the two links' latency.

    >>> r = replay([[0, 1], [1, 0]], record_bytes=125_000, network=Network.parse("up=1,down=1"),
    ...            latency=0.001)  # doctest: +SKIP
    >>> r.simulated_seconds  # doctest: +SKIP
    {'exchange': 1.002}
    """
    if not isinstance(racks, (Racks, type(None))):
        raise TypeError(f"Argument 'racks' must be a Racks or None, not {type(racks).__name__}.")
    lat = check_number(latency, "latency")
    plans = transfer_plans(S, record_bytes=record_bytes, network=network, schedule=schedule,
                           chunk_bytes=chunk_bytes, strategy=strategy)  # fmt: skip
    if not simgrid_available():
        raise ModuleNotFoundError(
            "SimGrid's Python module is not installed: apt-get install python3-simgrid (Debian), "
            "or pip install simgrid (builds it)"
        )
    K = elastic_matrix(S).shape[0]

    def bps(mbit: float | None) -> float | None:
        return None if mbit is None else mbit * 1e6 / 8

    platform = {
        "K": K, "master": bps(network.master), "up": bps(network.up) or 1e-9, "down": bps(network.down),
        "latency": lat,
        "racks": None if racks is None
        else {"hosts": racks.hosts, "up": bps(racks.up), "down": bps(racks.down)},
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, str(_SCRIPT)], input=json.dumps({"platform": platform, "modes": plans}),
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"SimGrid's replay failed (exit status {proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(proc.stdout)
    return ReplayResult(
        K=K, record_bytes=record_bytes, network=network, racks=racks, latency=lat, schedule=schedule,
        simulated_seconds={m: float(v) for m, v in out["seconds"].items()}, flows=int(out["flows"]),
        wall_seconds=float(out["wall_seconds"]),
    )  # fmt: skip
