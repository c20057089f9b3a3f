"""Claim 2: achievability of order-2 + cycle combining, and decodability of every symbol.

Notation
--------
==============  ====================================================================
``A_k^t``       batch (cache) of worker ``k`` now; ``A_k^{t+1}`` its batch next
``S[i][j]``     ``|A_i^t  intersect  A_j^{t+1}|``
``W``           ``sum_{i != j} S[i][j]``, the moved points
``P``           ``sum_{i < j} min(S[i][j], S[j][i])``, order-2 symbols
``Omega``       leftover matrix (claim 1)
``C``           a multiset of directed simple cycles packed in ``Omega`` (each arc ``u -> v``
                used at most ``Omega[u][v]`` times), ``|C|`` counted with multiplicity
``U``           leftover points on no cycle of ``C``
``+``           XOR of two equal-length records, addition in ``GF(2)^d``
==============  ====================================================================

Statement
---------
For every shuffle matrix ``S`` and every cycle packing ``C`` of its leftover matrix, the scheme

1. order-2 phase: for each pair ``i < j``, ``min(S[i][j], S[j][i])`` symbols ``x + y`` with
   ``x`` held by ``i`` and needed by ``j``, ``y`` held by ``j`` and needed by ``i``, all these
   points distinct;
2. leftover combining: for each cycle ``w_1 -> w_2 -> ... -> w_l -> w_1`` of ``C`` with fresh
   leftover points ``m_k`` held by ``w_k`` and needed by ``w_{k+1}`` (indices mod ``l``), the
   ``l - 1`` symbols ``m_1 + m_2, m_2 + m_3, ..., m_{l-1} + m_l``;
3. every point of ``U`` alone,

sends ``W - P - |C|`` symbols, and every worker recovers every point it needs from the symbols
and its cache. With conservation (claim 1) ``U`` can be made empty, and the load is
``W - P - |C|`` with the pairs sent first; the best choice of ``C`` is a maximum cycle packing.

Proof
-----
Counting. Every moved point lies in exactly one of the three phases: the pair phase takes
``min(S[i][j], S[j][i])`` points of each group ``(i, j)`` and of ``(j, i)``, ``Omega[i][j]``
points of group ``(i, j)`` remain, and the cycles take at most ``Omega[i][j]`` of them (the
packing condition), the rest being ``U``. Symbols: ``P`` (one per two points), ``l - 1`` per
cycle of ``l`` points, ``|U|``. The points in cycles number ``sum_C l``, so the total is
``P + sum_C (l - 1) + |U| = P + (W - 2P - |U|) - |C| + |U| = W - P - |C|``.

Decoding, one symbol at a time; "knows" means "has in cache or recovered earlier".

* Order-2 symbol ``x + y`` for pair ``{i, j}``: worker ``j`` holds ``y`` in ``A_j^t`` and
  computes ``x = (x + y) + y``; worker ``i`` holds ``x`` and computes ``y``.
* Cycle symbol ``m_k + m_{k+1}`` (``1 <= k <= l - 1``): worker ``w_{k+1}`` holds ``m_{k+1}``
  (it is in ``A_{w_{k+1}}^t``) and computes ``m_k``, the point it needs from this cycle. That
  serves ``w_2, ..., w_l``.
* Worker ``w_1`` needs ``m_l`` and holds ``m_1``. Peeling: it knows ``m_1``; from symbol
  ``m_1 + m_2`` it computes ``m_2``; from ``m_2 + m_3`` and ``m_2`` it computes ``m_3``; by
  induction on ``k``, after ``k - 1`` steps it knows ``m_k``; after ``l - 1`` steps it knows
  ``m_l``. Every one of the ``l - 1`` symbols is used, so (over GF(2)) none can be dropped:
  the symbols are linearly independent and ``m_l`` is their sum plus ``m_1``,
  ``m_l = m_1 + sum_{k=1}^{l-1} (m_k + m_{k+1})``, a sum that needs all of them.
* Uncoded points are read directly.

Each needed point of each worker is one of: a pair point, a cycle point, a point of ``U``,
and the cases above decode each. Decodability is the linear statement: for worker ``k``, every
unit vector ``e_n`` of a point ``n`` it needs lies in the GF(2) row space of the symbols' vectors
together with the unit vectors of its cache. (With ``d``-bit records the statement holds bit
by bit.)

Check
-----
On every shuffle matrix with equal row and column sums ``b`` for ``K = 3, b <= 3`` and
``K = 4, b <= 2`` (enumerated exhaustively, 83 + 306 matrices), on every 3 x 3 matrix with
entries in ``0..1`` (unequal batches included) and on the paper's Example 1, for both
strategies: a GF(2) rank certificate built with ``galois`` from ``DeliveryPlan.transmissions()``
alone (no library decoding code), ``rank(G) == rank([G; E_need])`` per worker; the symbol count
``W - P - |C|`` computed independently; a simulated byte-free decoding that follows
``decoding_steps`` on random 64-bit values; and for single cycles of length 3..7 that the first
worker needs all ``l - 1`` symbols (dropping any one breaks its rank certificate). The
enumeration of matrices is that of ``tests/oracles.py``, Example 1 that of ``tests/cases.py``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import galois
import numpy as np
import pytest

from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.plan import decoding_steps, plan_from_matrix
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES
from tests.oracles import brute_load, magic_matrices

GF2 = galois.GF2


def symbol_rows(a: np.ndarray, b: np.ndarray, N: int) -> np.ndarray:
    """Incidence vectors over the ``N`` points of the symbols ``a[s] + b[s]``."""
    T = np.zeros((a.size, N), dtype=np.uint8)
    T[np.arange(a.size), a] = 1
    two = b >= 0
    T[np.flatnonzero(two), b[two]] ^= 1
    return T


def certificate(plan) -> list[tuple[int, int, int]]:
    """Per worker ``(rank of symbols + cache, same plus needs, number needed)`` over GF(2)."""
    a, b, _ = plan.transmissions()
    N = plan.N
    T = symbol_rows(a, b, N)
    before, after = np.asarray(plan.placement_t.owner), np.asarray(plan.placement_t1.owner)
    out = []
    eye = np.eye(N, dtype=np.uint8)
    for k in range(plan.K):
        cache = eye[before == k]
        need = eye[(after == k) & (before != k)]
        G = np.vstack([T, cache])
        r0 = int(np.linalg.matrix_rank(GF2(G)))
        r1 = int(np.linalg.matrix_rank(GF2(np.vstack([G, need])))) if need.size else r0
        out.append((r0, r1, int(need.shape[0])))
    return out


def simulate(plan, seed: int) -> None:
    """Follow ``decoding_steps`` on random values and check every recovered value."""
    rng = np.random.default_rng(seed)
    value = rng.integers(0, 2**63, size=plan.N, dtype=np.int64)
    a, b, _ = plan.transmissions()
    sym = value[a] ^ np.where(b >= 0, value[np.maximum(b, 0)], 0)
    before, after = np.asarray(plan.placement_t.owner), np.asarray(plan.placement_t1.owner)
    for k in range(plan.K):
        known = {int(n): int(value[n]) for n in np.flatnonzero(before == k)}
        for s, kn, rec in decoding_steps(plan, k):
            if kn < 0:
                assert b[s] == -1 and a[s] == rec
                known[rec] = int(sym[s])
                continue
            assert kn in known, "a step uses a point the worker does not know yet"
            assert {int(a[s]), int(b[s])} == {kn, rec}
            known[rec] = int(sym[s]) ^ known[kn]
        for n in np.flatnonzero((after == k) & (before != k)):
            assert known.get(int(n)) == int(value[n])


def instances():
    yield EXAMPLE_1
    for K, bmax in ((3, 3), (4, 2)):
        for b in range(bmax + 1):
            yield from magic_matrices(K, b)
    for cells in itertools.product(range(2), repeat=9):
        yield [list(cells[0:3]), list(cells[3:6]), list(cells[6:9])]


def test_enumeration_counts():
    # semi-magic squares: OEIS A002817 (4 x 4) and A019298 (3 x 3)
    assert [sum(1 for _ in magic_matrices(3, b)) for b in range(5)] == [1, 6, 21, 55, 120]
    assert [sum(1 for _ in magic_matrices(4, b)) for b in range(3)] == [1, 24, 282]


@pytest.mark.parametrize("strategy", ["greedy", "exact"])
def test_every_needed_point_decodes(strategy):
    seen = 0
    for S in instances():
        S = np.array(S)
        if strategy == "exact" and not S.any():
            continue
        plan = plan_from_matrix(S, strategy=strategy)
        assert shuffle_matrix(plan.placement_t, plan.placement_t1).tolist() == S.tolist()
        a, _, _ = plan.transmissions()
        assert a.size == plan.rates.coded == brute_load(S, plan.rates.cycles_used)
        for r0, r1, _ in certificate(plan):
            assert r0 == r1  # the needed points lie in the span of symbols + cache
        simulate(plan, seed=seen)
        seen += 1
    assert seen > 800


def test_example_1_loads():
    # Attia and Tandon (2016), Example 1: K = 3, N = 15, uncoded 11, paired 7, coded 6.
    v, r = EXAMPLE_1_VALUES, plan_from_matrix(EXAMPLE_1).rates
    assert (r.uncoded, r.paired, r.coded) == (v["uncoded"], v["paired"], v["coded"])


@pytest.mark.parametrize("L", [3, 4, 5, 6, 7])
def test_first_worker_of_a_cycle_needs_every_cycle_symbol(L):
    S = np.zeros((L, L), dtype=np.int64)
    S[(np.arange(L) + 1) % L, np.arange(L)] = 1  # one L-cycle of leftovers, no pairs
    plan = plan_from_matrix(S)
    assert plan.n_cycles == 1 and plan.n_symbols == L - 1
    w1 = int(plan.cycle_workers[plan.cycle_ptr[0]])
    steps = decoding_steps(plan, w1)
    assert len(steps) == L - 1  # multi-step peeling
    assert steps[-1][2] == int(plan.cycle_points[plan.cycle_ptr[1] - 1])  # ends with m_l
    a, b, _ = plan.transmissions()
    T = symbol_rows(a, b, plan.N)
    before, after = np.asarray(plan.placement_t.owner), np.asarray(plan.placement_t1.owner)
    eye = np.eye(plan.N, dtype=np.uint8)
    cache, need = eye[before == w1], eye[(after == w1) & (before != w1)]
    for drop in range(L - 1):
        G = np.vstack([np.delete(T, drop, axis=0), cache])
        r0 = np.linalg.matrix_rank(GF2(G))
        r1 = np.linalg.matrix_rank(GF2(np.vstack([G, need])))
        assert r1 == r0 + 1  # without symbol `drop` the point m_l is out of reach


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
