"""Claim 14: the genie bound weighted by size: records of any sizes, the bound in bytes.

Notation
--------
==================  =================================================================
``x_1 .. x_N``      the records, independent, ``x_r`` uniform on ``{0, 1}^(8 d_r)``
``d_r``             bytes of record ``r`` (at least 1), ``B = sum of d_r``
``C_k, D_k``        ``A_k^t`` (cache of worker ``k``) and ``A_k^{t+1}`` (what it needs)
``X``               everything the master sends; its load in bytes is ``H(X) / 8``
``S[i][j]``         ``|C_i intersect D_j|``, records (claim 3)
``S_B[i][j]``       ``sum of d_r over r in C_i intersect D_j``, bytes
                    (``shuffle_matrix(..., sizes=d)``)
``sigma, pos``      an ordering of the workers and the place of each in it
``B_d(sigma)``      ``sum of S_B[i][j] over i != j with pos(i) > pos(j)``
``t, C``            with a storage of ``M = 1 + t`` batches (claim 6), record ``r`` is cut into
                    ``C = C(K - 1, t)`` pieces of ``d_r / C`` bytes
==================  =================================================================

Statement
---------
(a) For every ordering ``sigma`` and every scheme, ``H(X) / 8 >= B_d(sigma)``: every scheme sends
    at least ``LB_d = max over sigma of B_d(sigma)`` bytes, which is :func:`lower_bound` of
    ``S_B`` (``byte_loads(...).lower_bound_bytes``).

(b) ``S_B`` is the shuffle matrix of the records cut into bytes, each byte a point held and
    needed where its record is; so ``LB_d`` is claim 3's bound of those points, and every load
    of ``S_B`` (:func:`~coded_shuffle.plan.rates`) is that of a scheme on one-byte pieces: at least
    ``LB_d``, as claim 3 (b) says of any matrix.

(c) With a storage of ``M = 1 + t`` batches, the bound on pieces of claim 8 weighted by size,
    ``max over sigma of sum over the missed pieces r_T whose holders all come after their wanter of
    d_r / C``, is :func:`~coded_shuffle.storage.storage_lower_bound` of ``S_B`` (in its records,
    here bytes).

(d) ``m LB(S) <= LB_d <= m' LB(S)`` with ``m``, ``m'`` the smallest and largest ``d_r``, and
    ``LB_d`` is neither ``mean(d) LB(S)`` nor bounded by it in either direction: the sizes of
    the records that move, and where they move, set it.

(e) Claim 10's time bound holds in bytes: with ``d_j`` and ``o_i`` the columns and rows of
    ``S_B`` off the diagonal and ``L B`` replaced by ``LB_d``, every delivery takes at least
    ``max(max_j d_j / w, max_i o_i / (u + m), [u = 0] LB_d / m)``
    (:func:`coded_shuffle.network.predict_bytes`).

Proof
-----
(a) Claim 3 (a) word for word, with ``H(M) = 8 sum of d_r over r in M`` for the set ``M`` of
records held by a worker placed after the worker that needs them: the records are independent
and uniform, so ``H(M | Z) = H(M)`` is the sum of their entropies. The decoding order of ``sigma``
recovers ``M`` from ``(X, Z)`` (nothing in that argument used the records' lengths), so
``H(X) >= I(X; M | Z) = H(M) = 8 B_d(sigma)``.

(b) A record ``r`` in ``C_i intersect D_j`` contributes ``d_r`` bytes to cell ``(i, j)``: the byte
points of ``C_i intersect D_j`` number ``S_B[i][j]``. Claim 3 applies to those points (each
uniform on 8 bits), and its bound on them is ``max B_d``; a scheme on bytes is a scheme on the
records, so (a) and this agree.

(d) ``B_d(sigma)`` sums ``d_r`` over the records counted by ``B(sigma)``: it lies between ``m
B(sigma)`` and ``m' B(sigma)``, and the maxima over ``sigma`` keep the order. Example: three
workers, records ``0 -> 1``, ``1 -> 2``, ``2 -> 0`` moving round a cycle and a fourth staying at
worker 0; ``LB = 2`` (every ordering leaves out one record of the cycle). Of 10, 1, 1 and 1 bytes,
the best ordering leaves out a small one: ``LB_d = 11 > 2 * 13 / 4``; of 1, 1, 1 and 10 bytes,
the large record stays put and only the mean counts it: ``LB_d = 2 < 2 * 13 / 4``.

(c) Claim 8 (a) word for word with pieces of ``d_r / C`` bytes: the genie recovers the counted
pieces, of entropy ``8 sum d_r / C``. Claim 8 (b) counts, for a record moved ``o -> j``, the pieces
whose holders lie after ``j``: a number that depends on ``(o, j, sigma)`` alone, so the weighted
sum is ``sum over (o, j) of S_B[o][j]`` times it, over ``C``: the same function of ``S_B`` as the
bound on pieces is of ``S``.

(e) Claim 10's proof (a) and (b) counts bytes of independent records already, and never used
that they have one size; (c) is (a) of this claim over a link of rate ``m``.

Check
-----
Record by record, against brute force over all ``K!`` orderings (no matrix, no dynamic program):
``B_d`` summed over the records themselves for ``K <= 5`` and random sizes, equal to
``lower_bound(S_B)`` and at least ``m LB`` and at most ``m' LB``; (b) the matrix of the byte points
(each record repeated ``d_r`` times) equal to ``S_B``, and the plan on those points decoding
(``verify_plan``) with as many symbols as ``rates(S_B).coded``; (c) over every piece of every
record for ``K <= 5``, ``t = 1, 2``, against ``storage_lower_bound(S_B)``; (d) the examples; (e) the
time bound in bytes at most every mode's predicted time in bytes (each a schedule whose links
carry their bytes within it, the coded one the engine's plan of records of similar size paired)
on random sizes and networks.
"""

from __future__ import annotations

import itertools
import sys
from fractions import Fraction
from math import comb
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, predict_bytes
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import plan_delivery, rates, verify_plan
from coded_shuffle.storage import storage_lower_bound


def brute_byte_bound(before, after, d, K) -> int:
    """``max over sigma of sum of d_r`` over the moved records whose holder comes after their wanter."""
    moved = [(int(a), int(b), int(s)) for a, b, s in zip(before, after, d, strict=True) if a != b]
    best = 0
    for sigma in itertools.permutations(range(K)):
        pos = {w: p for p, w in enumerate(sigma)}
        best = max(best, sum(s for a, b, s in moved if pos[a] > pos[b]))
    return best


def brute_byte_storage_bound(before, after, d, K, t) -> Fraction:
    """The same over every missed piece ``r_T`` (``T`` a ``t``-set avoiding the holder and the
    wanter), each of ``d_r / C(K - 1, t)`` bytes, counted when ``{holder} u T`` all come after the
    wanter."""
    pieces = []
    for a, b, s in zip(before, after, d, strict=True):
        if a == b:
            continue
        for T in itertools.combinations([w for w in range(K) if w not in (a, b)], t):
            pieces.append((int(b), {int(a), *T}, int(s)))
    best = 0
    for sigma in itertools.permutations(range(K)):
        pos = {w: p for p, w in enumerate(sigma)}
        best = max(best, sum(s for j, A, s in pieces if all(pos[h] > pos[j] for h in A)))
    return Fraction(best, comb(K - 1, t))


def random_case(rng, K, N, top=50):
    before = rng.integers(0, K, N)
    after = rng.integers(0, K, N)
    d = rng.integers(1, top + 1, N)
    return before, after, d


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_the_bound_by_records(K):
    rng = np.random.default_rng(140 + K)
    for _ in range(12):
        before, after, d = random_case(rng, K, int(rng.integers(K, 25)))
        a, b = placement_from_owner(before, K), placement_from_owner(after, K)
        S, S_B = shuffle_matrix(a, b), shuffle_matrix(a, b, sizes=d)
        expect = brute_byte_bound(before, after, d, K)
        lb_B = lower_bound(S_B)
        assert lb_B.value == expect and lb_B.exact
        lb = lower_bound(S).value
        assert int(d.min()) * lb <= expect <= int(d.max()) * lb  # (d)
        assert expect <= rates(S_B).coded  # (b): a scheme on bytes never beats it


def test_bytes_are_points():
    rng = np.random.default_rng(1414)
    for _ in range(6):
        K = int(rng.integers(2, 6))
        before, after, d = random_case(rng, K, int(rng.integers(K, 12)), top=6)
        S_B = shuffle_matrix(placement_from_owner(before, K), placement_from_owner(after, K), sizes=d)
        a, b = placement_from_owner(np.repeat(before, d), K), placement_from_owner(np.repeat(after, d), K)
        assert np.array_equal(shuffle_matrix(a, b), S_B)
        plan = plan_delivery(a, b)
        verify_plan(plan)
        assert plan.n_symbols == rates(S_B).coded >= lower_bound(S_B).value


@pytest.mark.parametrize("K,t", [(3, 1), (4, 1), (4, 2), (5, 1), (5, 2)])
def test_the_bound_on_pieces_by_records(K, t):
    rng = np.random.default_rng(10 * K + t)
    for _ in range(4):
        before, after, d = random_case(rng, K, int(rng.integers(K, 14)))
        S_B = shuffle_matrix(placement_from_owner(before, K), placement_from_owner(after, K), sizes=d)
        got = storage_lower_bound(S_B, M=1 + t)
        assert got.value == brute_byte_storage_bound(before, after, d, K, t) and got.exact


def test_a_large_record_moving():
    # one record a worker, moving one step round; the ordering leaves out one record: the smallest
    before, after = [0, 1, 2], [1, 2, 0]
    a, b = placement_from_owner(before, 3), placement_from_owner(after, 3)
    assert lower_bound(shuffle_matrix(a, b)).value == 2
    sizes = [10, 1, 1]
    assert (
        lower_bound(shuffle_matrix(a, b, sizes=sizes)).value
        == 11
        == brute_byte_bound(before, after, sizes, 3)
    )


def test_neither_above_nor_below_the_mean():
    before, after = [0, 1, 2, 0], [1, 2, 0, 0]
    a, b = placement_from_owner(before, 3), placement_from_owner(after, 3)
    lb = lower_bound(shuffle_matrix(a, b)).value
    above = [10, 1, 1, 1]  # the large record moves: 11 > 2 * 13 / 4
    below = [1, 1, 1, 10]  # the large record stays: 2 < 2 * 13 / 4
    assert lower_bound(shuffle_matrix(a, b, sizes=above)).value == 11 > lb * Fraction(13, 4)
    assert lower_bound(shuffle_matrix(a, b, sizes=below)).value == 2 < lb * Fraction(13, 4)


@pytest.mark.parametrize(
    "spec", ["up=1000,down=1000", "master=1000,up=100,down=1000,multicast", "master=300,down=1000"]
)
def test_the_time_bound_in_bytes_is_at_most_every_prediction(spec):
    net = Network.parse(spec)
    rng = np.random.default_rng(len(spec))
    for _ in range(6):
        K = int(rng.integers(2, 7))
        N = K * int(rng.integers(2, 30))
        d = rng.integers(1, 5000, N)
        a, b = (epoch_placement(N, K, seed=int(rng.integers(1000)), epoch=e) for e in (0, 1))
        t = predict_bytes(a, b, sizes=d, network=net)
        finite = [v for v in t.predicted_seconds.values() if np.isfinite(v)]
        assert finite and t.bound_seconds <= min(finite) * (1 + 1e-12)
        moved = [(int(i), int(j), int(s)) for i, j, s in zip(a.owner, b.owner, d, strict=True) if i != j]
        most_missed = max(sum(s for _, j, s in moved if j == k) for k in range(K))
        assert t.bound_seconds >= most_missed / (net.down * 1e6 / 8) * (1 - 1e-12)


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
