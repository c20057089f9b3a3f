"""Claim 8: the genie bound with side information, and the cyclic shift's bound equal to R(t).

Notation
--------
==============  ====================================================================
``K, t, C``     workers; ``M = 1 + t``; ``C = C(K - 1, t)`` pieces a record (claim 6)
piece           ``r_T`` of a record ``r`` moved ``o -> j``, missed by ``j``: ``T`` a ``t``-set
                avoiding ``o`` and ``j``, held exactly by ``A = {o} u T``; pieces are independent
                and uniform on ``{0, 1}^(d / C)``
``sigma``       an ordering of the workers; ``after(j)`` the workers placed after ``j``
``B(sigma)``    number of missed pieces whose holders ``A`` all lie in ``after(wanter)``
``Z``           the cyclic batch shift, ``o_i = i + 1 mod K``, ``N / K`` records a worker
``R(t)``        ``(N / K) (K - 1 - t) / (t + 1)`` records
==============  ====================================================================

Statement
---------
(a) Every scheme for the placement of claim 6 sends at least ``max over sigma of B(sigma)``
    pieces (``B / C`` records); ``storage_lower_bound`` computes this maximum exactly for
    ``K <= 20`` and, beyond, ``B`` of one ordering (still a bound).

(b) ``B(sigma) = sum over j of C(a_j - 1, t) * sum of S[o][j] over o in after(j)``, ``a_j =
    |after(j)|`` (the closed form the dynamic program uses).

(c) For ``Z`` and ``0 <= t <= K - 1``: ``max B = (N / K) C(K - 1, t + 1)`` pieces, i.e. ``R(t)``
    records; with claim 7 (e), ``R(t)`` is the least load of ``Z`` and the worst-case optimum of
    the placement: no scheme guarantees less.

(d) At ``t = 0``, ``B`` is the bound of claim 3.

Proof
-----
(a) Claim 3's argument on pieces: let ``Mset`` be the counted pieces, ``Zset`` all other
pieces, given by a genie to every worker. Decode the workers in the order of ``sigma``. Worker
``j``'s cache consists of pieces of ``Zset`` and counted pieces held by ``j``; a counted piece held
by ``j`` has all its holders after its wanter, so it is wanted by a worker placed before ``j`` and
was recovered earlier. So ``j`` rebuilds its cache, runs its decoder and gets every piece it
wants, among them its counted ones. All of ``Mset`` is a function of the transmissions and
``Zset``, and ``H(X) >= H(Mset) = |Mset| d / C``.

(b) ``j`` wants, for each ``o`` with ``S[o][j]`` records for it and each ``t``-set ``T`` avoiding
``o`` and ``j``, one piece held by ``{o} u T``. Its holders lie in ``after(j)`` iff ``o`` does and
``T`` is inside ``after(j) \\ {o}``: ``C(a_j - 1, t)`` sets ``T``.

(c) Lower: ``sigma = (0, 1, ..., K - 1)``. Worker ``j <= K - 2`` receives from ``j + 1``, which is
after it, with ``a_j = K - 1 - j``; worker ``K - 1`` receives from 0, placed before it. So
``B = (N/K) sum_{j=0}^{K-2} C(K - 2 - j, t) = (N/K) sum_{m=0}^{K-2} C(m, t) = (N/K) C(K-1, t+1)``
(the hockey-stick identity). Upper: every bound is at most the load of a scheme, and claim 7 (e)
gives a scheme of ``(N/K) C(K-1, t+1)`` pieces. Records: ``C(K-1, t+1) / C(K-1, t) =
(K-1-t)/(t+1)``.

(d) ``C(a_j - 1, 0) = 1`` for ``a_j >= 1``: ``B(sigma)`` counts ``S[o][j]`` over ``o`` after ``j``.

Check
-----
(b) against the direct count over every piece and every ordering for ``K <= 5`` and random
matrices (brute force of ``tests/storage/test_storage.py``), and the dynamic program against it; (c) for
``K = 2..7`` by brute force over all ``K!`` orderings and for ``K = 8..12`` by the dynamic program,
every ``t``, against ``R(t)`` and the hockey-stick sum; (d) the library's bound at ``M = 1``
against :func:`coded_shuffle.bounds.lower_bound` on random matrices.
"""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound
from coded_shuffle.storage import storage_lower_bound, storage_ordering_bound, storage_worst_case
from tests.oracles import brute_pieces, brute_storage_bound


@pytest.mark.parametrize("K", [3, 4, 5])
def test_closed_form_and_dynamic_program(K):
    rng = np.random.default_rng(K)
    for t in range(K):
        S = rng.integers(0, 3, (K, K))
        pieces = brute_pieces(S, t)
        for order in itertools.permutations(range(K)):
            pos = {w: n for n, w in enumerate(order)}
            direct = sum(1 for o, j, T in pieces if all(pos[h] > pos[j] for h in T | {o}))
            assert storage_ordering_bound(S, order, M=t + 1) == direct
        assert storage_lower_bound(S, M=t + 1).pieces == brute_storage_bound(S, t)


@pytest.mark.parametrize("K", list(range(2, 13)))
def test_cyclic_shift_bound_is_R_t(K):
    for t in range(K):
        for n in (1, 2):
            N = n * K
            Z = cyclic_shift_matrix(N, K)
            hockey = n * sum(math.comb(m, t) for m in range(K - 1))
            assert hockey == n * math.comb(K - 1, t + 1)
            b = storage_lower_bound(Z, M=t + 1)
            got = brute_storage_bound(Z, t) if K <= 7 and n == 1 else b.pieces
            assert got == b.pieces == hockey
            assert b.value == storage_worst_case(N, K, t + 1) == Fraction(N * (K - 1 - t), K * (t + 1))


def test_t0_is_claim_3():
    rng = np.random.default_rng(3)
    for _ in range(40):
        K = int(rng.integers(2, 9))
        S = rng.integers(0, 6, (K, K))
        assert storage_lower_bound(S, M=1).pieces == lower_bound(S).value


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
