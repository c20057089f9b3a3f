"""GF(2) certificates that a delivery plan is decodable, built with ``galois``.

Notation
--------
==============  ================================================================
``e_n``         unit vector of point ``n`` over GF(2): one coordinate per point
``G_k``         worker ``k``'s system: one row per symbol (``e_a + e_b``, or ``e_a``
                alone) and one row ``e_n`` per point ``n`` in its cache
``need_k``      the points worker ``k`` needs and does not hold (``A_k^{t+1}`` minus ``A_k^t``)
==============  ================================================================

XOR is addition in GF(2), so worker ``k`` can rebuild its batch from its cache and the symbols
if and only if every ``e_n``, ``n`` in ``need_k``, lies in the row space of ``G_k``, that is

    rank(G_k) == rank([G_k; E_need_k]).

This is a statement about any decoder, not only the peeling decoder of
:func:`coded_shuffle.codec.decode_worker`. Only the points that appear in some symbol or in
``need_k`` get a coordinate: the other cache points add the same independent unit rows to both
sides.

``galois`` is imported only when a certificate is computed (about a second of import and
compilation): certificates are for tests, proofs and small plans, never the data path.
Reference: Attia and Tandon, Allerton 2016, arXiv:1609.09823 (XOR is addition in GF(2)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import check_int
from .plan import DeliveryPlan

__all__ = ["Certificate", "gf2_system", "gf2_certificate", "certify_plan", "MAX_CERTIFICATE_POINTS"]

#: Most coordinates (points) a certificate accepts; beyond that dense GF(2) ranks get slow.
MAX_CERTIFICATE_POINTS = 4000


@dataclass(frozen=True, eq=False)
class Certificate:
    """The GF(2) rank certificate of one worker of one plan.

    Attributes
    ----------
    worker : int
        The worker.
    points : numpy.ndarray
        The point of each coordinate.
    rank : int
        ``rank(G_k)``.
    rank_with_needs : int
        ``rank([G_k; E_need_k])``.
    needed : int
        ``|need_k|``.
    """

    worker: int
    points: np.ndarray
    rank: int
    rank_with_needs: int
    needed: int

    @property
    def decodable(self) -> bool:
        """Whether every needed point lies in the span of the symbols and the cache."""
        return self.rank == self.rank_with_needs


def gf2_system(plan: DeliveryPlan, worker: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(G, E_need, points)`` of ``worker`` as 0/1 ``uint8`` matrices over the coordinates ``points``.

    With sub-packets (``plan.subpackets > 1``) the coordinates are the pieces the plan names.

    Examples
    --------
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> G, E, pts = gf2_system(plan_from_matrix([[0, 1], [1, 0]]), 0)
    >>> G.tolist(), E.tolist(), pts.tolist()
    ([[1, 1], [1, 0]], [[0, 1]], [0, 1])
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    worker = check_int(worker, "worker", minimum=0)
    if worker >= plan.K:
        raise ValueError(f"Argument 'worker' must be less than K = {plan.K}, not {worker}.")
    a, b, _ = plan.transmissions()
    owner_t, owner_t1 = plan.piece_owners()
    held = owner_t == worker
    need = np.flatnonzero((owner_t1 == worker) & ~held)
    points = np.unique(np.concatenate([a, b[b >= 0], need]))
    if points.size > MAX_CERTIFICATE_POINTS:
        raise ValueError(
            f"Argument 'plan' must involve at most {MAX_CERTIFICATE_POINTS} points for a certificate, "
            f"not {points.size}."
        )
    col = np.searchsorted(points, np.arange(owner_t.size))  # valid only for points in ``points``
    cache = points[held[points]]
    G = np.zeros((a.size + cache.size, points.size), dtype=np.uint8)
    rows = np.arange(a.size)
    G[rows, col[a]] = 1
    coded = b >= 0
    G[rows[coded], col[b[coded]]] ^= 1
    G[a.size + np.arange(cache.size), col[cache]] = 1
    E = np.zeros((need.size, points.size), dtype=np.uint8)
    E[np.arange(need.size), col[need]] = 1
    return G, E, points


def _galois() -> Any:
    """The ``galois`` package, or one line naming the extra that installs it."""
    try:
        import galois
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "GF(2) certificates need galois, which the extra [certificates] installs: "
            "pip install 'galois>=0.4'"
        ) from None
    return galois


def gf2_certificate(plan: DeliveryPlan, worker: int) -> Certificate:
    """Return the GF(2) rank certificate of ``worker``: do the symbols and its cache span its needs?

    Parameters
    ----------
    plan : DeliveryPlan
        A plan of at most :data:`MAX_CERTIFICATE_POINTS` involved points.
    worker : int
        The worker.

    Returns
    -------
    Certificate

    Examples
    --------
    Example 1 of Attia and Tandon (2016): worker 0 needs the two cycle symbols and its pairs.

    >>> from coded_shuffle.plan import plan_from_matrix
    >>> cert = gf2_certificate(plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]]), 0)
    >>> cert.decodable, cert.needed
    (True, 3)
    """
    G, E, points = gf2_system(plan, worker)
    GF2 = _galois().GF2
    r0 = int(np.linalg.matrix_rank(GF2(G))) if G.size else 0
    r1 = int(np.linalg.matrix_rank(GF2(np.vstack([G, E])))) if E.size else r0
    points.flags.writeable = False
    return Certificate(worker=int(worker), points=points, rank=r0, rank_with_needs=r1, needed=int(E.shape[0]))


def certify_plan(plan: DeliveryPlan) -> list[Certificate]:
    """Return the certificate of every worker of ``plan``.

    Examples
    --------
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> all(c.decodable for c in certify_plan(plan_from_matrix([[0, 2, 1], [1, 0, 2], [2, 1, 0]])))
    True
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    return [gf2_certificate(plan, k) for k in range(plan.K)]
