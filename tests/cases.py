"""The test cases several tests and proofs share: matrices, their known values, and their sources.

No value here comes from the code under test. Each is read off the paper, worked out by hand
from the definitions (docs/algorithms.md), or computed by a brute force of :mod:`tests.oracles`; the
comment beside each value says which. :mod:`tests.test_cases` recomputes each value from its
source, without the library (all but the GF(2) min-rank, which proofs/claim_5_optimality.py
establishes by an exhaustive search).

``EXAMPLE_1``
    Attia and Tandon, "On the Worst-case Communication Overhead for Distributed Data Shuffling",
    Allerton 2016 (arXiv:1609.09823), Example 1: a shuffle matrix, ``K = 3``, ``N = 15``;
    uncoded 11, paired 7, coded 6.
``GREEDY_SHORT_K6`` (the K = 6 greedy trap)
    A 6-worker leftover matrix where shortest-cycles-first greedy packs 2 cycles and the best
    packing 3.
``OMEGA_GAP_K7`` (the K = 7 gap matrix), and ``S_GAP_K7`` its shuffle
    A 7-worker leftover matrix where no cycle packing meets the lower bound
    (proofs/claim_5_optimality.py (e)): the best scheme of pairs and cycles sends 11, the bound is 10.

Matrices are tuples of tuples (shared, so immutable); ``np.array(case)`` makes an array.
"""

from __future__ import annotations

from fractions import Fraction
from types import MappingProxyType

import numpy as np


def shuffle_from_leftovers(omega, b: int) -> np.ndarray:
    """``Omega + diag(b - out-degree)``: a shuffle with batches of ``b`` whose leftover matrix is
    ``Omega`` when ``Omega`` is balanced and has no 2-cycles (proofs/claim_5_optimality.py (a)).

    >>> shuffle_from_leftovers([[0, 1], [1, 0]], 3).tolist()
    [[2, 1], [1, 2]]
    """
    om = np.asarray(omega, dtype=np.int64)
    return om + np.diag(b - om.sum(axis=1))


def _frozen(matrix) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in row) for row in matrix)


# --------------------------------------------------------------------------- Example 1

#: The paper's text (our copy) gives ``S_{2,1} = 2`` and ``S_{1,2} = 1`` (1-based), the order-2
#: symbols per pair and the loads, not the whole matrix; this one is consistent with all of them.
EXAMPLE_1 = ((2, 1, 2), (2, 1, 2), (1, 3, 1))

#: Known values of :data:`EXAMPLE_1`, loads in records.
EXAMPLE_1_VALUES = MappingProxyType(
    {
        "K": 3,  # the paper
        "N": 15,  # the paper
        "uncoded": 11,  # the paper: R_uncoded = 11, the sum of the off-diagonal entries
        "pairs": 4,  # the paper: one order-2 symbol for {w1, w2}, one for {w1, w3}, two for {w2, w3}
        "leftovers": 3,  # the paper: 3 leftovers after the order-2 phase
        "paired": 7,  # the paper: R_paired-coding = 4 + 3
        "cycles": 1,  # the paper: the 3 leftovers form one cycle, sent as 2 symbols
        "coded": 6,  # the paper: R_proposed-coded = 4 + 2
        "peel_steps": 2,  # the paper: one worker of the cycle decodes in two steps
        "needed": (3, 4, 4),  # by hand: the off-diagonal column sums, points each worker needs
        "lower_bound": 6,  # oracles.brute_bound, the best of the 3! orderings
        "worst_case": 10,  # N (K - 1) / K (docs/algorithms.md, "The worst case")
    }
)

#: The receiver index of the frame of :data:`EXAMPLE_1` (docs/wire-format.md), rows
#: ``(worker, first entry, count)``. By hand: symbols 0-3 are order-2 (workers 0-1, 0-2, 1-2,
#: 1-2), symbols 4-5 the chain of the cycle through all three workers, so worker 0 reads
#: symbols 0, 1, 4, 5, worker 1 reads 0, 2-5 and worker 2 reads 1-5.
EXAMPLE_1_RECEIVER_RUNS = ((0, 0, 2), (0, 4, 2), (1, 0, 1), (1, 2, 4), (2, 1, 5))

# --------------------------------------------------------------------------- K = 6 greedy trap

#: A 6-worker leftover matrix where shortest-cycles-first greedy packs 2 cycles, the best packing
#: 3. Balanced, no 2-cycles, out-degrees at most 2.
GREEDY_SHORT_K6 = (
    (0, 1, 1, 0, 0, 0),
    (0, 0, 0, 1, 1, 0),
    (0, 0, 0, 1, 0, 0),
    (1, 0, 0, 0, 0, 1),
    (1, 0, 0, 0, 0, 0),
    (0, 1, 0, 0, 0, 0),
)

#: A best packing of :data:`GREEDY_SHORT_K6`: three cycles using each of its 9 arcs once (by hand).
GREEDY_SHORT_K6_BEST = ((0, 1, 4), (0, 2, 3), (1, 3, 5))

#: Known values of :data:`GREEDY_SHORT_K6`.
GREEDY_SHORT_K6_VALUES = MappingProxyType(
    {
        "arcs": 9,  # by inspection, weight 1 each
        # by hand: shortest cycles first takes (0, 1, 3), the first 3-cycle met, which leaves only
        # the 6-cycle (0, 2, 3, 5, 1, 4)
        "greedy_cycles": 2,
        "max_packing": 3,  # oracles.brute_max_packing; GREEDY_SHORT_K6_BEST by hand
        "tau": 3,  # oracles.brute_tau: packing and feedback arc set meet
        "batch": 2,  # the largest out-degree: shuffle_from_leftovers(GREEDY_SHORT_K6, 2) is a shuffle
    }
)

# --------------------------------------------------------------------------- K = 7 gap matrix

#: A 7-worker leftover matrix where no cycle packing meets the lower bound: ``nu = 4 < tau = 5``
#: (proofs/claim_5_optimality.py (e), found by random search at K = 8 and reduced).
OMEGA_GAP_K7 = (
    (0, 0, 0, 0, 1, 0, 1),
    (1, 0, 0, 1, 0, 0, 0),
    (0, 1, 0, 0, 0, 0, 1),
    (0, 0, 0, 0, 0, 1, 1),
    (0, 0, 1, 1, 0, 0, 0),
    (1, 0, 1, 0, 0, 0, 0),
    (0, 1, 0, 0, 1, 1, 0),
)

#: The shuffle of :data:`OMEGA_GAP_K7` with batches of 3 (``N = 21``): ``OMEGA_GAP_K7`` plus the
#: diagonal.
S_GAP_K7 = _frozen(shuffle_from_leftovers(OMEGA_GAP_K7, 3))

#: Known values of :data:`OMEGA_GAP_K7` and :data:`S_GAP_K7`, loads in records.
OMEGA_GAP_K7_VALUES = MappingProxyType(
    {
        "arcs": 15,  # by inspection, weight 1 each
        "simple_cycles": 29,  # oracles.simple_cycles
        "max_packing": 4,  # nu, oracles.brute_max_packing
        "fractional_packing": Fraction(9, 2),  # nu*, oracles.enumeration_packing(integral=False)
        "tau": 5,  # oracles.brute_tau over the 7! orderings
        # nu(q Omega): q = 2 by oracles.brute_max_packing, q = 3 by oracles.enumeration_packing
        "max_packing_of_copies": MappingProxyType({2: 9, 3: 13}),
        "N": 21,  # 7 batches of 3
        "batch": 3,
        "uncoded": 15,  # W: one moved point an arc
        "pairs": 0,  # no 2-cycles
        "lower_bound": 10,  # oracles.brute_bound of S_GAP_K7; = W - P - tau (claim 5 (a))
        "coded": 11,  # W - P - nu: pairs and a best packing
        "coded_halves": Fraction(21, 2),  # W - P - nu(2 Omega) / 2
        "gf2_minrank": 11,  # proofs/claim_5_optimality.py (g), by exhaustive search
    }
)
