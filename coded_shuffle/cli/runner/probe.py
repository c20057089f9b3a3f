"""A short probe of a job's links at its start (``run --probe``): the rates they reached, as a SPEC
that can be set beside the one the job states (``--network``).

:meth:`~coded_shuffle.transport.MPITransport.probe_phases` times four transfers of ``n`` bytes;
each phase's rate is the bytes its busiest link carried over its seconds:

=============  ===================================  ==========================================
phase          busiest link (bytes)                 reads as
=============  ===================================  ==========================================
master_all     the master's uplink (``K n``)        ``master``
master_one     worker 0's downlink (``n``)          ``down``, unless the master is slower
ring           every uplink and downlink (``n``)    ``up``, unless the downlinks are slower
incast         worker 0's downlink (``n``)          ``down``, unless ``K - 1`` uplinks are slower
=============  ===================================  ==========================================

so ``master`` is ``master_all``'s rate, ``up`` the ring's and ``down`` the larger of
``master_one``'s and ``incast``'s. Each is the rate the link reached while it was the busiest
one, so a lower bound on it where another link set the pace (a host that cannot keep up, an
uplink slower than the downlinks). Multicast is not probed: the SPEC says it where the job sends
``--multicast``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...network import Network

__all__ = ["ProbedRates"]


def _round(mbit: float) -> float:
    """``mbit`` to three significant digits."""
    return float(f"{mbit:.3g}")


@dataclass(frozen=True)
class ProbedRates:
    """The seconds of a probe's phases and the rates they read as (module docstring).

    Examples
    --------
    Four workers; 1 MB a phase: the master's uplink at 1000 Mbit/s, the workers' uplinks at 100.

    >>> p = ProbedRates(10**6, 4, {"master_all": 0.032, "master_one": 0.008, "ring": 0.08,
    ...                            "incast": 0.0267})
    >>> p.rates()
    {'master': 1000.0, 'up': 100.0, 'down': 1000.0}
    >>> str(p.network(multicast=True))
    'master=1000,up=100,down=1000,multicast'
    """

    nbytes: int
    K: int
    seconds: dict[str, float]

    def _mbit(self, phase: str, nbytes: float) -> float | None:
        t = self.seconds.get(phase)
        return None if t is None or not t > 0 else _round(nbytes * 8 / t / 1e6)

    def rates(self) -> dict[str, float | None]:
        """``master``, ``up`` and ``down`` in Mbit/s, None where no phase measured it."""
        downs = [r for r in (self._mbit("master_one", self.nbytes), self._mbit("incast", self.nbytes)) if r]
        return {
            "master": self._mbit("master_all", self.K * self.nbytes),
            "up": self._mbit("ring", self.nbytes),
            "down": max(downs) if downs else None,
        }

    def network(self, *, multicast: bool = False) -> Network | None:
        """The probed rates as a :class:`~coded_shuffle.network.Network` (``multicast`` as the job
        sends), or None where no downlink was measured (a job of one peer)."""
        r = self.rates()
        if r["down"] is None:
            return None
        multicast = multicast and r["master"] is not None
        return Network(down=r["down"], master=r["master"], up=r["up"], multicast=multicast)

    def to_dict(self, *, multicast: bool = False) -> dict[str, object]:
        """JSON-ready: the bytes a phase, each phase's seconds, the rates and their SPEC."""
        net = self.network(multicast=multicast)
        return {
            "probe_bytes": self.nbytes,
            "phase_seconds": dict(self.seconds),
            "rates_mbit": self.rates(),
            "network": None if net is None else str(net),
        }

    def line(self, stated: Network | None, *, multicast: bool = False) -> str:
        """One line: the probed SPEC, and the link furthest below the stated one (if any)."""
        net = self.network(multicast=multicast)
        mb = f"{self.nbytes / 1e6:.3g} MB a phase"
        if net is None:
            return f"probe: no link measured ({mb})"
        out = f"probe: the links reached {net} Mbit/s ({mb}; each a lower bound where another was slower)"
        if stated is None:
            return out
        gaps = [
            (got / want, k)
            for k in ("master", "up", "down")
            if (want := getattr(stated, k)) is not None and (got := getattr(net, k)) is not None
        ]
        if not gaps:
            return out + f"; --network says {stated}"
        ratio, k = min(gaps)
        if ratio >= 0.9:
            return out + f"; --network says {stated}, which they reach"
        return out + f"; --network says {stated}: {k} reached {ratio:.0%} of it"
