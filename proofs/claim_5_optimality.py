"""Claim 5: per-shuffle optimality of pairs + cycle packing, and where it fails.

Notation
--------
==============  ====================================================================
``S``           a shuffle matrix with conservation (row sum = column sum per worker)
``W, P``        moved points, order-2 symbols (claim 2)
``Omega``       leftover matrix: balanced (claim 1) and without 2-cycles
``nu(Omega)``   largest cycle packing: most directed simple cycles, with multiplicity,
                using each arc ``u -> v`` at most ``Omega[u][v]`` times
``nu*(Omega)``  the same with fractional multiplicities (a linear program)
``tau(Omega)``  least weight of a feedback arc set of ``Omega``
``LB(S)``       the lower bound of claim 3, ``W - tau(S)``
``greedy``      the library's shortest-cycles-first packing; ``exact`` its HiGHS packing
``q``           sub-packets: pieces a record; the scheme on pieces packs ``q Omega``
``G``           side-information digraph of ``Omega``: one node per arc (a moved point),
                ``e = (u, v) -> f`` when ``f`` leaves ``v`` (the receiver of ``e`` holds ``f``)
``minrk(G)``    least rank over GF(2) of a matrix ``M`` fitting ``G``: ``M[e][e] = 1`` and
                ``M[e][f] = 0`` unless ``e -> f`` in ``G``
==============  ====================================================================

Statement
---------
(a) Reduction. ``LB(S) = W - P - tau(Omega)`` and the scheme with a packing ``C`` sends
    ``W - P - |C|``, so it meets the bound exactly when ``|C| = tau(Omega)``; always
    ``|C| <= nu(Omega) <= nu*(Omega) <= tau(Omega)``. Optimality of ``S`` depends on ``S``
    only through ``Omega``, and every balanced ``Omega`` without 2-cycles whose out-degrees are
    at most ``b`` is the leftover matrix of a shuffle with all batches of size ``b``
    (``S = Omega + diag(b - out-degree)``).

(b) ``K <= 3`` (proof below, no computer needed): the greedy packing, hence also the exact one,
    meets the bound for every shuffle.

(c) ``K = 4`` (proof by a cited theorem): the exact packing meets the bound for every shuffle.
    Greedy is covered for ``K = 4`` only by the finite check.

(d) ``K = 4, 5, 6`` (finite check, ``proofs/sweep_optimality.py``, run by hand): for every
    balanced ``Omega`` without 2-cycles and with out-degrees at most ``b`` -- equivalently every
    conserved shuffle matrix whose batches have at most ``b`` points, any ``N`` --

        K = 4, b <= 20  (34 481 leftover matrices, 1 471 up to relabelling; 14 s);
        K = 5, b <= 7   (745 893 leftover matrices, 6 299 up to relabelling; 3.2 min);
        K = 6, b <= 2   (35 113 leftover matrices, 75 up to relabelling; 28 s),

    greedy packing = exact packing = ``tau(Omega)``: both meet the bound, on every one. The
    exact packing was run on every class. ``SWEEP_RESULT`` below holds these counts. Nothing
    is claimed for ``K = 5, b >= 8``, ``K = 6, b >= 3`` or ``K >= 7`` beyond the cases named here. (Greedy
    and exact differ from ``K = 6``: :data:`GREEDY_SHORT_K6` has greedy 2, exact 3 = bound.)

(e) Counterexample (result). The 7-worker leftover matrix :data:`OMEGA_GAP_K7`, 15 arcs of
    weight 1, has ``nu = 4``, ``nu* = 9/2`` and ``tau = 5``. The shuffle
    ``S = OMEGA_GAP_K7 + diag(3 - out-degree)`` (``K = 7``, batches of 3, ``N = 21``) has
    ``W = 15``, ``P = 0``, lower bound 10, and even the exact packing sends 11.

(f) Sub-packets on (e) (result). For every ``q >= 1``, pairs plus any cycle packing of
    ``q Omega`` (the scheme of ``plan.rates(S, subpackets=q)``, any strategy) send at least
    ``15 - 9/2 = 21/2`` records for this ``S``; ``q = 2`` sends exactly ``21/2``. So no number
    of pieces brings a pairs-and-cycles scheme to the bound 10.

(g) Scalar linear codes on (e) (result). The GF(2) min-rank of this index-coding instance is
    11: no scheme whose 10 symbols are each the XOR of a set of whole records (a scalar linear
    code over GF(2) of length 10, with any decoders) lets every worker decode, and the
    pairs-and-cycles scheme is such a code of length 11.

(h) Linear codes on halves (result). With every record cut in two, no GF(2)-linear code of 20
    half-record symbols (each the XOR of a set of halves, any halves of any records) lets every
    worker decode: the GF(2) min-rank of the instance on halves is 21, met by pairs and cycles
    with ``q = 2``. Over GF(2), 21/2 records is the best any linear scheme on halves sends.

What (f), (g) and (h) do not say: nothing about linear codes on ``q >= 3`` pieces (pairs and
cycles send ``32/3`` with ``q = 3``; whether 31 thirds suffice is not checked), codes over other
fields, or non-linear codes; whether any scheme at all sends 10 records for this ``S`` (the genie
bound being tight) stays open.

What (e) means. The conjecture "pairs + a maximum cycle packing meet the lower bound for every
shuffle" (every case tried before this check met the bound; whether all do was open) is false: it fails at
``K = 7``. ``K <= 3`` is proven, ``K = 4`` is proven from a cited theorem, ``K = 5`` holds up to
the batch size of the finite check, and ``K = 6`` is open beyond batches of 2 (20 000 random
shuffles showed no gap).
For this ``S`` at least one of two things holds: the genie bound is not tight, or a scheme that
is not built from pairs and cycles beats 11. By (f) sub-packets get to 21/2 but not further:
the cycle phase saves at most ``nu*(Omega) = 9/2`` records, short of ``tau = 5``
(``nu(2 Omega) = 9``, ``nu(3 Omega) = 13``). By (g) the scheme that beats 11, if any, is not a
scalar linear code over GF(2). The worst-case result of claim 4 is untouched: it needs only the
cyclic shift.

Proof
-----
(a) Fix an ordering ``sigma``. For a pair ``{i, j}`` exactly one of ``S[i][j]``, ``S[j][i]``
is backward (holder after receiver) and it equals ``min(S[i][j], S[j][i])`` plus the ``Omega``
entry in the same direction. Summing, ``B_S(sigma) = P + B_Omega(sigma)``. Maximising over
``sigma`` and using claim 3 (b) for ``Omega``, whose total weight is ``W - 2P``:
``LB(S) = P + (W - 2P) - tau(Omega) = W - P - tau(Omega)``. Weak duality: a FAS ``F`` meets
every cycle of a packing, and each arc of ``F`` lies on at most ``Omega[u][v]`` of the cycles
(counted with multiplicity), so ``|C| <= weight(F)``; the same bound holds for fractional
packings, and ``nu <= nu*`` as the integer program is a restriction of the linear one. The
construction of ``S`` from ``Omega`` has row sums ``out_i + b - out_i = b`` and column sums
``in_i + b - out_i = b`` (balance), and ``leftover_matrix(S) = Omega`` since ``Omega`` has
no 2-cycles.

(b) ``K = 1``: nothing moves. ``K = 2``: a balanced ``Omega`` with at most one arc direction
is zero. ``K = 3``: if ``Omega`` is not zero, relabel so that ``Omega[0][1] = a > 0``; then
``Omega[1][0] = 0``. Balance at 0: ``a + Omega[0][2] = Omega[2][0]`` so ``Omega[2][0] > 0``,
``Omega[0][2] = 0`` and ``Omega[2][0] = a``. Balance at 1: ``Omega[1][2] = a + Omega[2][1]`` so
``Omega[2][1] = 0`` and ``Omega[1][2] = a``. So ``Omega`` is ``a`` times the triangle
``0 -> 1 -> 2 -> 0``; greedy packs it ``a`` times, and every ordering has one backward arc of
the triangle, so ``tau = a``.

(c) Replace every arc of weight ``w`` by ``w`` parallel arcs. For a planar digraph, directed
cycles are the directed cuts of the planar dual and feedback arc sets are its dijoins, so the
Lucchesi-Younger theorem (C. L. Lucchesi and D. H. Younger, "A minimax theorem for directed
graphs", J. London Math. Soc. 1978) gives: the most arc-disjoint directed cycles equals the
least feedback arc set. Every graph on 4 vertices is planar (a subgraph of ``K_4``), so
``nu(Omega) = tau(Omega)`` for ``K <= 4``, and ``exact`` (a maximum packing) meets the bound.
This step rests on the cited theorem, which is not reproved here. ``K_5`` is not planar, so the
argument stops at ``K = 4``, and (e) shows the statement is false at ``K = 7``.

(d) is a finite computation; by (a) it covers every shuffle matrix with those batch sizes.
For each ``K`` and ``b`` the sweep lists every balanced ``Omega`` without 2-cycles and with
out-degrees ``<= b`` (arc weights on the pairs not touching the last worker are free, the
others follow from balance), keeps one representative per relabelling of workers (a
relabelling changes neither ``nu`` nor ``tau``), computes ``tau`` by brute force over all
``K!`` orderings and ``greedy`` with the library; since ``greedy <= exact <= nu <= tau``,
``greedy = tau`` settles both strategies. ``exact`` was run on every representative
(the script can skip it where greedy already equals ``tau``, which is sound by weak duality).

(e) ``nu = 4`` and ``tau = 5`` by brute force in the check below (all ``7!`` orderings; a
recursion over simple cycles for the packing), ``nu* = 9/2`` by linear programming over every
simple cycle, and the loads by the library. It was found by random search over sums of
permutation matrices at ``K = 8`` (5 of 20 000 shuffles had a gap; none at ``K = 6`` or ``7``
in 20 000 each) and reduced by removing cycles while the gap stayed.

(f) LP duality with the explicit weights :data:`FRACTIONAL_COVER_K7` ``y >= 0`` on the arcs,
``sum_a y_a Omega_a = 9/2``, every directed cycle of weight ``>= 1`` (checked exactly, in
fractions, by shortest paths: ``y(u, v) + dist_y(v, u) >= 1`` for every arc, which covers every
closed walk, and again over the listed simple cycles). A packing of ``q Omega`` uses the same
cycles (same support) and each arc ``a`` at most ``q Omega_a`` times, so its ``n`` cycles satisfy
``n <= sum_C sum_{a in C} y_a = sum_a y_a (uses of a) <= q * 9/2``, and the scheme sends
``W - P - n / q >= 15 - 9/2`` records: the bound is independent of ``q`` and of the packer. The
nine cycles of :data:`HALF_PACKING_K7` use every arc at most twice, a packing of ``2 Omega``
with ``n = 9``: ``q = 2`` meets ``21/2`` (and ``nu* = 9/2`` exactly, weights ``1/2`` each).

(g) The index-coding instance: the moved points are the messages ``x_e``, one per arc
``e = (u, v)`` of ``Omega``, held by ``u`` and wanted by ``v`` alone; worker ``v`` knows its cache,
the points on the arcs leaving ``v`` and its points that stay. A scalar linear code of length
``r`` sends ``y = A x`` (``A`` over GF(2), the same combination of every bit of the records).
If ``v`` can decode ``x_e`` with any decoder, then ``u_e`` lies in the row space of ``A`` plus the
unit vectors of ``v``'s side information: otherwise some ``z`` has ``A z = 0``, ``z = 0`` on the
side information and ``z_e = 1``, and ``x = 0``, ``x = z`` look the same to ``v``. Taking one such
vector per message, dropping the columns of points that stay (never wanted, they only enlarge
the side information), gives a ``15 x 15`` matrix ``M`` fitting ``G`` with ``rank M <= r``.
Conversely, a fitting matrix of rank ``r`` is a code of length ``r`` (send a basis of its rows).
So the shortest scalar linear code has length ``minrk(G)``.

Let ``F`` be a feedback arc set of ``Omega`` of size ``tau = 5``; its complement ``I`` induces an
acyclic subgraph of ``G`` (a cycle of ``G`` inside ``I`` is a closed walk of ``Omega`` inside ``I``).
Under a topological order of ``G[I]``, ``M[I, I]`` is unit triangular, so ``rank M >= 10`` (this is
the lower bound 10 again). Suppose ``rank M = 10``, and let ``Z`` be the right kernel of ``M``,
``dim Z = 5``. A ``z`` in ``Z`` that vanishes on ``F`` has ``M[I, I] z_I = 0``, so ``z = 0``: the
projection of ``Z`` onto the coordinates ``F`` is one-to-one, hence onto. Take for each
``f in F`` the ``z`` in ``Z`` that is 1 at ``f`` and 0 elsewhere on ``F``, and write ``b_e`` in
``GF(2)^5`` for row ``e`` of the matrix of these five vectors. Then ``b_f`` is the ``f``-th unit
vector for ``f in F``, and row ``e`` of ``M Z = 0`` reads ``b_e = sum of b_g over the g with
M[e][g] = 1, g != e``: every ``b_e`` lies in the span of ``{b_g : e -> g}``. Conversely such
vectors spanning ``GF(2)^5`` give a kernel of dimension 5, hence ``rank M <= 10``.
:func:`kernel_assignment` searches all such ``b``: in reverse topological order of ``G[I]``
every successor of ``e`` is already assigned, so ``b_e`` ranges over a known span (at most 8
vectors), and each constraint of an arc of ``F`` is tested as soon as its successors are
assigned. The search is exhaustive and finds none (about a thousand nodes, milliseconds), so
``minrk(G) >= 11``; the four arc-disjoint cycles of :func:`four_disjoint_cycles` give a code of
length 11 (``l - 1`` XORs a cycle, one symbol for the arc left), checked by GF(2) ranks in
:func:`decodes`, so ``minrk(G) = 11``. The search is cross-checked against exhaustive min-rank
on small digraphs and on :data:`GREEDY_SHORT_K6`, where it must find a code.

(h) On halves the instance is the index-coding instance of the 30 half points
(:func:`piece_graph`: the receiver of a half knows both halves of every point it caches, not the
other half of the point it wants), and the argument of (g) applies unchanged: its feedback sets
are the halves of the feedback sets of ``Omega``, so a code of 20 half symbols gives a kernel
``Z`` of dimension 10 that projects one-to-one onto the 10 halves of any smallest feedback arc
set ``F'``. With ``b`` as in (g) on the halves and ``W_e`` the span of the two ``b`` of the halves
of ``e``, the conditions read: ``W_e`` lies in the sum of the ``W_g`` over ``e -> g``; the two
halves of ``F`` have unit vectors; and, from the projection onto every one of the 69 smallest
feedback arc sets ``F'``, the ``W_f``, ``f in F'``, are planes in direct sum (every arc lies in
one, so every ``W_e`` is a plane). Only the subspaces enter, so
:func:`piece_kernel_subspaces` enumerates the planes of each ``W_e``'s allowed sum in reverse
topological order, tests the direct sums and the arcs of ``F`` as soon as they are set, and finds
none (in about a second): the min-rank on halves is at least 21, and the ``q = 2``
plan of the library sends 21 (claim (f)). The pruned search is cross-checked against the plain
search of (g) run on :func:`piece_graph` on small digraphs, for ``q = 1`` and ``2``.

Check
-----
The reduction (a) on every 4 x 4 matrix with line sums ``b <= 2`` and random 5 x 5 ones; (b) on
every 3-worker ``Omega`` with out-degrees ``<= 6``; (d) re-run in CI at small sizes (``K = 4,
b <= 3``; ``K = 5, b <= 2``) with the exact packing also checked against an independent
brute-force packing; :data:`GREEDY_SHORT_K6`; (e) with independent brute force; (f) by the
exact certificates and the library's ``subpackets=2`` plan; (g) by the exhaustive search, itself
checked against exhaustive min-rank, and the explicit code of length 11; (h) by the subspace
search, checked against the plain search on the pieces. The brute forces (simple cycles, the
packing, ``tau`` over all orderings, the enumeration of matrices) are those of
``tests/oracles.py``; :data:`GREEDY_SHORT_K6` and :data:`OMEGA_GAP_K7`, with their known values,
live in ``tests/cases.py``.
"""

from __future__ import annotations

import itertools
import sys
from fractions import Fraction
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import leftover_matrix
from coded_shuffle.plan import pack_cycles, plan_from_matrix, rates
from tests.cases import (
    GREEDY_SHORT_K6,
    GREEDY_SHORT_K6_VALUES,
    OMEGA_GAP_K7,
    OMEGA_GAP_K7_VALUES,
    shuffle_from_leftovers,
)
from tests.oracles import (
    brute_max_packing,
    brute_tau,
    enumeration_packing,
    magic_matrices,
    simple_cycles,
)

#: Weights on the arcs of :data:`OMEGA_GAP_K7` (others 0): every cycle weighs at least 1, the sum is
#: 9/2; the dual certificate that no cycle packing, fractional or of ``q Omega``, exceeds ``9/2`` a record.
FRACTIONAL_COVER_K7 = {
    (0, 6): Fraction(1, 2),
    (2, 1): Fraction(1),
    (2, 6): Fraction(1),
    (3, 6): Fraction(1, 2),
    (4, 3): Fraction(1, 2),
    (5, 0): Fraction(1, 2),
    (6, 1): Fraction(1, 2),
}

#: Nine cycles of :data:`OMEGA_GAP_K7` using every arc at most twice: a packing of ``2 Omega``.
HALF_PACKING_K7 = (
    (0, 4, 2, 1),
    (0, 4, 3, 5),
    (0, 6, 1),
    (0, 6, 5),
    (1, 3, 5, 2),
    (1, 3, 6),
    (2, 6, 4),
    (2, 6, 5),
    (3, 6, 4),
)

#: Printed by ``python proofs/sweep_optimality.py`` (all ``b`` up to ``b_max``; counts at ``b_max``):
#: ``(K, b_max) -> (leftover matrices, classes up to relabelling, greedy short of tau, exact short of tau)``.
SWEEP_RESULT = {
    (4, 20): (34_481, 1_471, 0, 0),
    (5, 7): (745_893, 6_299, 0, 0),
    (6, 2): (35_113, 75, 0, 0),
}

# --------------------------------------------------------------------------- brute force


def balanced_leftovers(K: int, b: int) -> np.ndarray:
    """Every balanced ``K x K`` matrix without 2-cycles and with out-degrees ``<= b``, stacked."""
    pairs = list(itertools.combinations(range(K), 2))
    free = [p for p in pairs if p[1] < K - 1]
    chunks = []
    vals = np.arange(-b, b + 1)
    first = [()] if not free else [(v,) for v in vals]  # chunk over the first free pair
    m = max(len(free) - 1, 0)
    rest_grid = (
        np.array(list(itertools.product(vals, repeat=m)), dtype=np.int64).reshape(-1, m)
        if m
        else (np.zeros((1, 0), dtype=np.int64))
    )
    for head in first:
        grid = np.hstack([np.full((rest_grid.shape[0], len(head)), head, dtype=np.int64), rest_grid])
        grid = grid[:, : len(free)]
        x = dict(zip(free, grid.T, strict=True))  # x[(i, j)] > 0: i -> j, < 0: j -> i
        for v in range(K - 1):
            net = np.zeros(grid.shape[0], dtype=np.int64)
            for (i, j), col in zip(free, grid.T, strict=True):
                if i == v:
                    net += col
                elif j == v:
                    net -= col
            x[(v, K - 1)] = -net
        om = np.zeros((grid.shape[0], K, K), dtype=np.int64)
        for (i, j), col in x.items():
            om[:, i, j] = np.maximum(col, 0)
            om[:, j, i] = np.maximum(-col, 0)
        om = om[om.sum(axis=2).max(axis=1, initial=0) <= b]
        chunks.append(om)
        if not free:
            break
    out = np.concatenate(chunks) if chunks else np.zeros((0, K, K), dtype=np.int64)
    return out


def one_per_relabelling(omegas: np.ndarray, b: int) -> np.ndarray:
    """Keep one matrix per class under simultaneous relabelling of rows and columns."""
    n, K, _ = omegas.shape
    base = np.uint64(b + 1)
    off = [(i, j) for i in range(K) for j in range(K) if i != j]
    best = np.full(n, np.iinfo(np.uint64).max, dtype=np.uint64)
    for p in itertools.permutations(range(K)):
        code = np.zeros(n, dtype=np.uint64)
        for i, j in off:
            code = code * base + omegas[:, p[i], p[j]].astype(np.uint64)
        np.minimum(best, code, out=best)
    _, first = np.unique(best, return_index=True)
    return omegas[np.sort(first)]


def sweep(K: int, b: int, *, exact_all: bool) -> dict[str, object]:
    """Compare greedy, exact and ``tau`` on every class of leftover matrices with out-degrees ``<= b``."""
    omegas = balanced_leftovers(K, b)
    classes = one_per_relabelling(omegas, b)
    tau = brute_tau(classes)
    greedy = np.array([pack_cycles(om).cycles_used for om in classes], dtype=np.int64)
    run_exact = np.ones(len(classes), bool) if exact_all else greedy < tau
    exact = greedy.copy()
    for k in np.flatnonzero(run_exact):
        exact[k] = pack_cycles(classes[k], strategy="exact").cycles_used
    assert np.all(greedy <= exact) and np.all(exact <= tau)  # weak duality, (a)
    return {
        "K": K,
        "b": b,
        "matrices": int(len(omegas)),
        "classes": int(len(classes)),
        "exact_runs": int(run_exact.sum()),
        "greedy_short": [classes[k].tolist() for k in np.flatnonzero(greedy < tau)],
        "exact_short": [classes[k].tolist() for k in np.flatnonzero(exact < tau)],
        "greedy_short_of_exact": int((greedy < exact).sum()),
        "omegas": classes,
        "tau": tau,
        "exact": exact,
    }


def side_information_graph(omega) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """``G``: the arcs of ``omega`` (weight 1 each) and, for each, the arcs leaving its receiver."""
    K = len(omega)
    arcs = [(u, v) for u in range(K) for v in range(K) if omega[u][v]]
    assert all(omega[u][v] == 1 for u, v in arcs), "one point per arc"
    succ = [[g for g, (x, _) in enumerate(arcs) if x == v] for _, v in arcs]
    return arcs, succ


def is_acyclic(succ, nodes) -> bool:
    """Whether ``succ`` restricted to ``nodes`` has no directed cycle (peel the nodes without successor)."""
    rest = set(nodes)
    while rest:
        sinks = [v for v in rest if not any(w in rest for w in succ[v])]
        if not sinks:
            return False
        rest.difference_update(sinks)
    return True


def min_feedback_nodes(succ) -> tuple[int, ...]:
    """A smallest set of nodes whose removal leaves ``succ`` acyclic, by trying sizes in turn."""
    n = len(succ)
    for size in range(n + 1):
        for F in itertools.combinations(range(n), size):
            if is_acyclic(succ, set(range(n)) - set(F)):
                return F
    raise AssertionError("unreachable")


def span(vectors) -> set[int]:
    """Every GF(2) combination of bit-mask vectors."""
    out = {0}
    for v in vectors:
        out |= {x ^ v for x in out}
    return out


def kernel_assignment(succ, F) -> list[int] | None:
    """Vectors ``b_e`` (bit masks of ``len(F)`` bits) with ``b_f`` the unit vectors on ``F`` and every
    ``b_e`` in the span of its successors' vectors, or None if there are none (proof of (g)).

    ``succ`` minus ``F`` must be acyclic. Such vectors exist exactly when a matrix fitting ``succ``
    has rank ``len(succ) - len(F)``.
    """
    n = len(succ)
    rest = set(range(n)) - set(F)
    assert is_acyclic(succ, rest)
    order = []  # reverse topological order of succ[rest]: each node after all its successors
    while rest:
        e = min(v for v in rest if not any(w in rest for w in succ[v]))
        order.append(e)
        rest.discard(e)
    b = [0] * n  # each entry is set before it is read: successors come first in ``order``
    for k, f in enumerate(F):
        b[f] = 1 << k
    pos = {e: i for i, e in enumerate(order)}
    checks: list[list[int]] = [[] for _ in order]  # constraints of F, each once its successors are set
    for f in F:
        checks[max([pos[g] for g in succ[f] if g in pos], default=0)].append(f)

    def extend(i: int) -> bool:
        if i == len(order):
            return True
        e = order[i]
        for x in span(b[g] for g in succ[e]):
            b[e] = x
            if all(b[f] in span(b[g] for g in succ[f]) for f in checks[i]) and extend(i + 1):
                return True
        return False

    if not order:
        return b if all(b[f] in span(b[g] for g in succ[f]) for f in F) else None
    return b if extend(0) else None


def all_min_feedback_nodes(succ) -> list[tuple[int, ...]]:
    """Every smallest set of nodes whose removal leaves ``succ`` acyclic."""
    n, size = len(succ), len(min_feedback_nodes(succ))
    return [F for F in itertools.combinations(range(n), size) if is_acyclic(succ, set(range(n)) - set(F))]


def piece_graph(succ, q: int) -> list[list[int]]:
    """The instance on pieces: node ``e q + k`` knows every piece of every successor of ``e``."""
    return [[g * q + j for g in succ[e] for j in range(q)] for e in range(len(succ)) for _ in range(q)]


def piece_kernel_subspaces(succ, q: int) -> list[tuple[int, ...]] | None:
    """Subspaces ``W_e`` (bases of bit masks, ``q |F|`` bits) for a linear code on ``q`` pieces a
    message of length ``q (n - |F|)`` pieces, or None if there is none (proof of (h)).

    ``W_e`` is the span of the kernel rows of the ``q`` pieces of ``e`` (the ``b`` of
    :func:`kernel_assignment` on :func:`piece_graph`): for ``F`` a smallest feedback set,
    ``W_f`` is spanned by ``q`` unit vectors; every ``W_e`` lies in the sum of its successors'
    subspaces; and for every smallest feedback set ``F'`` the ``W_f``, ``f in F'``, have dimension
    ``q`` and are independent (their pieces are a feedback set of the piece instance).
    """
    n = len(succ)
    fases = all_min_feedback_nodes(succ)
    F = min(fases, key=lambda Fp: (sum(len(succ[e]) for e in range(n) if e not in Fp), Fp))  # fewest choices
    rest = set(range(n)) - set(F)
    order = []  # reverse topological order of succ[rest]
    while rest:
        e = min(v for v in rest if not any(w in rest for w in succ[v]))
        order.append(e)
        rest.discard(e)
    W: list[tuple[int, ...]] = [()] * n  # each entry set before it is read
    for k, f in enumerate(F):
        W[f] = tuple(1 << (q * k + j) for j in range(q))
    pos = {e: i for i, e in enumerate(order)}
    pos.update({f: -1 for f in F})
    checks: list[list[int]] = [[] for _ in order]
    for f in F:
        checks[max([pos[g] for g in succ[f]] + [0])].append(f)
    in_some = set().union(*map(set, fases))

    def subspaces(vectors, dim: int):
        """A basis of every subspace of ``span(vectors)`` of dimension ``dim``, each once."""
        elements = sorted(span(vectors) - {0})
        seen = set()
        for basis in itertools.combinations(elements, dim):
            if gf2_rank(basis) == dim and (key := frozenset(span(basis))) not in seen:
                seen.add(key)
                yield basis

    def extend(i: int) -> bool:
        if i == len(order):
            return True
        e = order[i]
        around = [v for g in succ[e] for v in W[g]]
        for dim in [q] if e in in_some else range(q + 1):
            for basis in subspaces(around, dim):
                W[e] = basis
                ok = all(
                    gf2_rank(vs := [v for f in Fp if pos[f] <= i for v in W[f]]) == len(vs)
                    for Fp in fases
                    if e in Fp
                )
                ok = ok and all(
                    gf2_rank([v for g in succ[f] for v in W[g]] + list(W[f]))
                    == gf2_rank([v for g in succ[f] for v in W[g]])
                    for f in checks[i]
                )
                if ok and extend(i + 1):
                    return True
        return False

    return W if extend(0) else None


def gf2_rank(rows) -> int:
    """Rank over GF(2) of bit-mask rows."""
    basis: dict[int, int] = {}
    for r in rows:
        while r:
            top = r.bit_length() - 1
            if top not in basis:
                basis[top] = r
                break
            r ^= basis[top]
    return len(basis)


def brute_minrank(succ) -> int:
    """Least GF(2) rank over every matrix fitting ``succ`` (``2^(arcs)`` matrices)."""
    n = len(succ)
    free = [(e, g) for e in range(n) for g in succ[e]]
    best = n
    for bits in itertools.product((0, 1), repeat=len(free)):
        rows = [1 << e for e in range(n)]
        for (e, g), bit in zip(free, bits, strict=True):
            rows[e] |= bit << g
        best = min(best, gf2_rank(rows))
    return best


def decodes(succ, code) -> bool:
    """Whether every node ``e`` decodes from the symbols ``code`` (bit masks over the nodes) and its
    side information ``succ[e]``: ``u_e`` in the row space of ``code`` plus the side information."""
    for e, known in enumerate(succ):
        side = [1 << g for g in known]
        if gf2_rank([*code, *side, 1 << e]) != gf2_rank([*code, *side]):
            return False
    return True


def four_disjoint_cycles(omega) -> list[tuple[int, ...]]:
    """Four arc-disjoint simple cycles of ``omega`` (weights 1), by trying every set of four."""
    K = len(omega)
    arc_sets = [
        (cyc, frozenset(cyc[k] * K + cyc[(k + 1) % len(cyc)] for k in range(len(cyc))))
        for cyc in simple_cycles(omega)
    ]
    for choice in itertools.combinations(arc_sets, 4):
        if sum(len(a) for _, a in choice) == len(frozenset().union(*(a for _, a in choice))):
            return [cyc for cyc, _ in choice]
    raise AssertionError("no four arc-disjoint cycles")


# --------------------------------------------------------------------------- checks


def test_reduction_on_every_4x4_shuffle_up_to_batch_2():
    n = 0
    for b in range(3):
        for S in magic_matrices(4, b):
            S = np.array(S)
            omega = leftover_matrix(S)
            W = int(S.sum() - np.trace(S))
            P = sum(min(int(S[i, j]), int(S[j, i])) for i, j in itertools.combinations(range(4), 2))
            tau = int(brute_tau(omega[None])[0])
            assert lower_bound(S).value == W - P - tau
            assert rates(S).coded == W - P - pack_cycles(omega).cycles_used
            n += 1
    assert n == 307


def test_reduction_random_5x5():
    rng = np.random.default_rng(5)
    for _ in range(30):
        S = np.zeros((5, 5), dtype=np.int64)
        for _ in range(int(rng.integers(1, 6))):
            S[np.arange(5), rng.permutation(5)] += 1
        omega = leftover_matrix(S)
        W = int(S.sum() - np.trace(S))
        P = int(np.triu(np.minimum(S, S.T), 1).sum())
        assert lower_bound(S).value == W - P - int(brute_tau(omega[None])[0])


def test_every_leftover_matrix_is_reached_by_a_shuffle():
    for om in balanced_leftovers(4, 3):
        S = shuffle_from_leftovers(om, 3)
        assert S.min() >= 0
        assert (S.sum(axis=0) == 3).all() and (S.sum(axis=1) == 3).all()
        assert leftover_matrix(S).tolist() == om.tolist()


def test_three_workers_are_triangles_and_greedy_is_optimal():
    omegas = balanced_leftovers(3, 6)
    assert len(omegas) == 1 + 2 * 6  # zero, and a times each of the two triangles
    tau = brute_tau(omegas)
    for om, t in zip(omegas, tau, strict=True):
        a = int(om[0].sum())
        assert int(om.sum()) == 3 * a and t == a
        assert pack_cycles(om).cycles_used == a


@pytest.mark.parametrize(("K", "bmax"), [(4, 3), (5, 2)])
def test_small_sweep_with_brute_force_packing(K, bmax):
    for b in range(1, bmax + 1):
        res = sweep(K, b, exact_all=True)
        assert res["greedy_short"] == [] and res["exact_short"] == []
        for om, t, e in zip(res["omegas"], res["tau"], res["exact"], strict=True):
            assert brute_max_packing(om.tolist()) == e == t


def test_enumeration_matches_shuffles():
    # the leftover matrices of all 4 x 4 shuffles with batches of 2 are the listed ones with b <= 2
    seen = {tuple(leftover_matrix(S).ravel().tolist()) for S in magic_matrices(4, 2)}
    listed = {tuple(om.ravel().tolist()) for om in balanced_leftovers(4, 2)}
    assert seen == listed


def test_greedy_short_of_exact_at_six_workers():
    v = GREEDY_SHORT_K6_VALUES
    om = np.array(GREEDY_SHORT_K6)
    assert pack_cycles(om).cycles_used == v["greedy_cycles"]
    assert pack_cycles(om, strategy="exact").cycles_used == v["max_packing"]
    assert brute_max_packing(om.tolist()) == v["max_packing"] == v["tau"] == int(brute_tau(om[None])[0])
    S = shuffle_from_leftovers(om, v["batch"])
    assert rates(S, strategy="exact").coded == lower_bound(S).value == rates(S).coded - 1


def test_no_cycle_packing_meets_the_bound_at_seven_workers():
    v = OMEGA_GAP_K7_VALUES
    om = np.array(OMEGA_GAP_K7)
    assert (om.sum(axis=0) == om.sum(axis=1)).all() and int(om.sum()) == v["arcs"]
    assert int(brute_tau(om[None])[0]) == v["tau"]
    assert brute_max_packing(om.tolist()) == v["max_packing"]
    nu_star = enumeration_packing(om, integral=False)  # the linear program over every simple cycle
    assert Fraction(nu_star).limit_denominator(100) == v["fractional_packing"]
    S = shuffle_from_leftovers(om, v["batch"])
    assert int(S.sum()) == v["N"] and (S.sum(axis=0) == v["batch"]).all()
    best = rates(S, strategy="exact")
    assert (best.uncoded, best.pairs, best.coded) == (v["uncoded"], v["pairs"], v["coded"])
    assert lower_bound(S).value == v["lower_bound"]
    for q, nu in v["max_packing_of_copies"].items():  # sub-packets do not close the gap
        assert pack_cycles(q * om, strategy="exact").cycles_used == nu < q * v["tau"]


def test_sub_packets_cannot_reach_the_bound_at_seven_workers():
    known = OMEGA_GAP_K7_VALUES
    om = np.array(OMEGA_GAP_K7)
    y = FRACTIONAL_COVER_K7
    assert all(om[u, v] == 1 for u, v in y) and all(w >= 0 for w in y.values())
    assert sum(y[a] * int(om[a]) for a in y) == known["fractional_packing"]
    # every closed walk weighs >= 1: shortest paths (Floyd-Warshall) in exact fractions
    inf = Fraction(10**9)
    dist = [[Fraction(0) if u == v else (y.get((u, v), Fraction(0)) if om[u, v] else inf) for v in range(7)]
            for u in range(7)]  # fmt: skip
    for k, u, v in itertools.product(range(7), repeat=3):
        dist[u][v] = min(dist[u][v], dist[u][k] + dist[k][v])
    assert all(y.get((u, v), 0) + dist[v][u] >= 1 for u in range(7) for v in range(7) if om[u, v])
    cycles = simple_cycles(om.tolist())
    weight = [sum(y.get((c[k], c[(k + 1) % len(c)]), 0) for k in range(len(c))) for c in cycles]
    assert len(cycles) == known["simple_cycles"] and min(weight) == 1
    # the nine cycles use every arc at most twice: q = 2 packs 9 cycles
    uses = np.zeros((7, 7), dtype=np.int64)
    for c in HALF_PACKING_K7:
        assert c in cycles
        for k in range(len(c)):
            uses[c[k], c[(k + 1) % len(c)]] += 1
    assert (uses <= 2 * om).all() and len(HALF_PACKING_K7) == known["max_packing_of_copies"][2]
    # so, for every q, the scheme sends >= 15 - 9/2 records; the library's q = 2 plan meets it
    S = shuffle_from_leftovers(om, known["batch"])
    W, P = known["uncoded"], known["pairs"]
    for q in (1, 2, 3, 4):
        r = rates(S, strategy="exact", subpackets=q)
        assert r.cycles_used <= q * known["fractional_packing"]
        assert r.coded == W - P - Fraction(r.cycles_used, q) >= known["coded_halves"] > lower_bound(S).value
    assert rates(S, strategy="exact", subpackets=2).coded == known["coded_halves"]


def test_search_agrees_with_exhaustive_minrank_on_small_digraphs():
    rng = np.random.default_rng(7)
    bidirected_c5 = [[(v - 1) % 5, (v + 1) % 5] for v in range(5)]  # min-rank 3, acyclic induced 2
    graphs = [bidirected_c5]
    while len(graphs) < 25:
        n = int(rng.integers(3, 7))
        succ = [[w for w in range(n) if w != v and rng.random() < 0.35] for v in range(n)]
        if sum(map(len, succ)) <= 13:
            graphs.append(succ)
    found = []
    for succ in graphs:
        F = min_feedback_nodes(succ)
        b = kernel_assignment(succ, F)
        found.append(b is not None)
        assert (b is not None) == (brute_minrank(succ) == len(succ) - len(F))
    assert not found[0] and any(found) and not all(found)


def test_scalar_linear_codes_need_eleven_symbols_at_seven_workers():
    known = OMEGA_GAP_K7_VALUES
    arcs, succ = side_information_graph(OMEGA_GAP_K7)
    assert len(arcs) == known["arcs"] and sum(map(len, succ)) == 33
    F = min_feedback_nodes(succ)
    # n - |F| = 10, the bound
    assert len(F) == known["tau"] == int(brute_tau(np.array(OMEGA_GAP_K7)[None])[0])
    assert kernel_assignment(succ, F) is None  # no fitting matrix of rank 10: min-rank >= 11
    # the same search finds rank n - tau where the bound is met (GREEDY_SHORT_K6, 3 cycles)
    arcs6, succ6 = side_information_graph(GREEDY_SHORT_K6)
    F6 = min_feedback_nodes(succ6)
    b = kernel_assignment(succ6, F6)
    assert b is not None and gf2_rank(b) == len(F6) == GREEDY_SHORT_K6_VALUES["tau"]
    assert all(b[e] in span(b[g] for g in succ6[e]) for e in range(len(succ6)))
    # a code of length 11: l - 1 XORs along each of four arc-disjoint cycles, the arc left alone
    cycles = four_disjoint_cycles(OMEGA_GAP_K7)
    index = {a: e for e, a in enumerate(arcs)}
    code, covered = [], set()
    for c in cycles:
        es = [index[(c[k], c[(k + 1) % len(c)])] for k in range(len(c))]
        covered.update(es)
        code += [(1 << es[k]) | (1 << es[k + 1]) for k in range(len(es) - 1)]
    code += [1 << e for e in range(15) if e not in covered]
    length = known["gf2_minrank"]
    assert len(code) == length and gf2_rank(code) == length and decodes(succ, code)
    assert not decodes(succ, code[:-1])


def test_subspace_search_agrees_with_plain_search_on_pieces():
    rng = np.random.default_rng(9)
    graphs = []
    while len(graphs) < 16:  # small digraphs and graphs: the bound is met, a code must be found
        n = int(rng.integers(4, 7))
        if len(graphs) % 2:
            edges = [(u, v) for u, v in itertools.combinations(range(n), 2) if rng.random() < 0.4]
            succ = [[w for w in range(n) if (v, w) in edges or (w, v) in edges] for v in range(n)]
        else:
            succ = [[w for w in range(n) if w != v and rng.random() < 0.35] for v in range(n)]
        if sum(map(len, succ)) <= 10:
            graphs.append(succ)
    for extra in [None, (0, 2), (1, 4), (3, 0)]:  # the 5-cycle both ways, with an arc added: not met
        succ = [[(v - 1) % 5, (v + 1) % 5] for v in range(5)]
        if extra:
            succ[extra[0]] = sorted({*succ[extra[0]], extra[1]})
        graphs.append(succ)
    found = {1: [], 2: []}
    for succ in graphs:
        F = min_feedback_nodes(succ)
        for q in (1, 2):
            plain = kernel_assignment(piece_graph(succ, q), [f * q + j for f in F for j in range(q)])
            found[q].append(piece_kernel_subspaces(succ, q) is not None)
            assert found[q][-1] == (plain is not None)
    assert found[1] == found[2] == [True] * 16 + [False] * 4


def test_linear_codes_on_halves_need_twenty_one_at_seven_workers():
    arcs, succ = side_information_graph(OMEGA_GAP_K7)
    assert len(all_min_feedback_nodes(succ)) == 69
    assert piece_kernel_subspaces(succ, 1) is None  # (g) again, by the pruned search
    assert piece_kernel_subspaces(succ, 2) is None  # no 20 half symbols
    assert piece_kernel_subspaces(side_information_graph(GREEDY_SHORT_K6)[1], 2) is not None
    known = OMEGA_GAP_K7_VALUES
    S = shuffle_from_leftovers(np.array(OMEGA_GAP_K7), known["batch"])
    assert plan_from_matrix(S, strategy="exact", subpackets=2).n_symbols == 2 * known["coded_halves"]


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
