"""Claim 4: the worst case. The scheme never sends more than N (K-1)/K, and the cyclic shift needs it.

Notation
--------
============  ==================================================================
``S``         shuffle matrix of ``N`` points on ``K >= 2`` workers, row sum ``r_i`` equal to
              column sum ``c_i`` for every worker (claim 1: conservation; this holds for equal
              batches and for the library's batches when ``K`` does not divide ``N``)
``W, P``      moved points and order-2 symbols (claim 2)
``coded``     ``W - P - |C|`` for a cycle packing ``C`` that leaves no leftover (greedy or exact)
``LB``        the lower bound of claim 3
``Z``         the cyclic batch shift: ``S[(k+1) mod K][k] = N/K``, worker ``k``'s next batch is
              worker ``k+1``'s whole current batch (``K`` divides ``N``)
============  ==================================================================

Statement
---------
(a) Under conservation, ``coded <= W (K-1)/K <= N (K-1)/K`` for both library strategies.

(b) For the cyclic shift ``Z``: ``LB(Z) = coded(Z) = N (K-1)/K``. So no scheme can guarantee
    fewer than ``N (K-1)/K`` symbols for every shuffle, and the scheme guarantees that many:
    the worst-case optimum is ``N (K-1)/K`` (uncoded needs ``N`` for ``Z``).

(c) (Finite restatement.) Over all shuffles with all batches of size ``b`` (``N = K b``), the
    maximum of ``LB`` and the maximum of ``coded`` both equal ``N (K-1)/K``.

Proof
-----
(a) Both strategies remove cycles while the leftover graph has one, and under conservation
that ends with no leftover (claim 1 (c)). So the moved points split into ``P`` pairs, each
sent as 1 symbol for 2 points, and cycles, each of some length ``l`` with ``3 <= l <= K``
(a simple cycle visits each worker at most once) sent as ``l - 1`` symbols for ``l`` points.
For ``K >= 2``, ``1/2 <= (K-1)/K`` and ``(l-1)/l = 1 - 1/l <= 1 - 1/K``. Summing over the parts,

    coded = P + sum_C (l - 1) <= (K-1)/K (2P + sum_C l) = (K-1)/K W,

and ``W <= N`` (the moved points are some of the points).

(b) ``Z`` has ``W = N``, no pair (``Z[k][k+1] = 0`` for ``K >= 3``; for ``K = 2`` the two
groups pair up, ``P = N/2``), and its leftovers are ``N/K`` copies of the ``K``-cycle. Coded:
``N - N/K`` for ``K >= 3`` (``N/K`` cycles of ``K - 1`` symbols) and ``N/2`` for ``K = 2``.
Lower bound: the ordering ``(0, 1, ..., K-1)`` places holder ``k+1`` after receiver ``k`` for
``k = 0..K-2``, so ``B = (K-1) N/K``. With (a), ``N(K-1)/K <= LB(Z) <= R*(Z) <= coded(Z) =
N(K-1)/K``.

(c) follows from (a) and (b): ``Z`` is one of the shuffles, with ``LB = coded = N(K-1)/K``, and
no shuffle has ``coded`` larger, hence none has ``LB`` larger (``LB <= coded``, claim 3).

Check
-----
(a) exhaustively over every matrix with row and column sums ``b`` for ``K = 3, b <= 4`` and
``K = 4, b <= 2``, and on seeded random matrices with equal sums for ``K = 5..8`` (the bound
``W (K-1)/K`` is computed from the entries, independently of the library); (b) for
``K = 2..7`` with brute force over all ``K!`` orderings and for ``K = 8`` with the library
against the closed form; (c) exhaustively for ``K = 3, b <= 4`` and ``K = 4, b <= 2`` with
brute-force bounds. The enumeration of matrices and the brute-force bound are those of
``tests/oracles.py``.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound, worst_case
from coded_shuffle.plan import rates
from tests.oracles import brute_bound, magic_matrices


def moved(S) -> int:
    S = np.asarray(S)
    return int(S.sum() - np.trace(S))


@pytest.mark.parametrize(("K", "bmax"), [(3, 4), (4, 2)])
def test_scheme_never_exceeds_worst_case_and_the_maximum_is_attained(K, bmax):
    for b in range(1, bmax + 1):
        N = K * b
        top_lb = top_coded = 0
        for S in magic_matrices(K, b):
            W = moved(S)
            for strategy in ("greedy", "exact"):
                r = rates(S, strategy=strategy)
                assert r.uncoded_leftovers == 0
                assert Fraction(r.coded) <= Fraction(W * (K - 1), K) <= Fraction(N * (K - 1), K)  # (a)
            top_coded = max(top_coded, r.coded)
            top_lb = max(top_lb, brute_bound(S))
        assert top_lb == top_coded == worst_case(N, K)  # (c)


@pytest.mark.parametrize("K", [5, 6, 7, 8])
def test_random_equal_batches(K):
    rng = np.random.default_rng(K)
    for _ in range(40):
        b = int(rng.integers(1, 7))
        S = np.zeros((K, K), dtype=np.int64)
        for _ in range(b):  # a sum of b permutation matrices has all line sums b
            S[np.arange(K), rng.permutation(K)] += 1
        r = rates(S)
        assert r.uncoded_leftovers == 0
        assert Fraction(r.coded) <= Fraction(moved(S) * (K - 1), K) <= worst_case(K * b, K)


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6, 7, 8])
def test_cyclic_shift_needs_the_worst_case(K):
    for N in (K, 3 * K):
        Z = cyclic_shift_matrix(N, K)
        expect = worst_case(N, K)
        bound = brute_bound(Z) if K <= 7 else lower_bound(Z).value
        assert bound == lower_bound(Z).value == expect
        r = rates(Z)
        assert r.uncoded == N and r.coded == expect


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
