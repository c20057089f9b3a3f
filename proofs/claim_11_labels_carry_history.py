"""Claim 11: which bytes of a record a label names cannot be a function of the owner and the label.

Notation
--------
==============  ====================================================================
``K, t``        workers, ``M = 1 + t``; labels are ``t``-subsets ``T`` of the workers other
                than the owner ``o`` (claim 6, (I))
slots           the ``C(K - 1, t)`` byte ranges a record is cut into (its pieces' contents)
rule            injections ``phi_o``: labels of owner ``o`` -> slots, one per worker ``o``: "the
                piece labelled ``T`` of a record of ``o`` is slot ``phi_o(T)``"
update          a record moves ``o -> j``: the piece labelled ``T`` gets the label
                ``s(T) = T`` with ``j`` replaced by ``o`` (claim 6, (a): ``(T \\ {j}) u {o}`` if
                ``j`` is in ``T``, else ``T``); its bytes do not change
consistent      ``phi_j(s(T)) = phi_o(T)`` for every ``o != j`` and every label ``T`` of ``o``:
                the rule names the same bytes after every move
==============  ====================================================================

Statement
---------
For ``K >= 3`` and ``1 <= t <= K - 2`` no rule is consistent. So a placement that moves no bytes
on its update must carry, record by record, which slot each label names (a function of the
record's history of owners): :class:`coded_shuffle.storage.PiecePlacement` keeps the holder set of
every slot, ``8 N P`` bytes for ``P`` pieces a record, ``O(N)`` for whole records (``P = 1``, where
there is one slot and nothing to name). At ``t = 0`` and ``t = K - 1`` a record has one piece and
the question does not arise.

Proof
-----
Take three distinct workers ``o, j, l`` and a ``(t - 1)``-set ``U`` avoiding all three (it exists as
``K - 3 >= t - 1``). ``U u {j}`` is a label of ``o``; a move ``o -> l`` leaves it as it is (it holds
no ``l``), so ``phi_o(U u {j}) = phi_l(U u {j})``. A move ``l -> j`` turns the label ``U u {j}`` of
``l`` into ``U u {l}``: ``phi_l(U u {j}) = phi_j(U u {l})``. A move ``j -> o`` leaves ``U u {l}`` of
``j`` as it is: ``phi_j(U u {l}) = phi_o(U u {l})``. So ``phi_o`` sends the distinct labels
``U u {j}`` and ``U u {l}`` to one slot: not an injection.

Check
-----
Every rule, exhaustively, for ``K = 3`` (``t = 1``) and ``K = 4`` (``t = 1, 2``): none consistent;
the update ``s`` is that of :func:`coded_shuffle.storage.update_storage`, read off its holder
sets; and the placement's memory is ``8 N P`` bytes.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.orders import placement_from_owner
from coded_shuffle.storage import piece_placement, update_storage


def labels(K: int, t: int, o: int) -> list[frozenset[int]]:
    return [frozenset(T) for T in itertools.combinations([w for w in range(K) if w != o], t)]


def moved_label(T: frozenset[int], o: int, j: int) -> frozenset[int]:
    return (T - {j}) | {o} if j in T else T


def consistent(K: int, t: int, phi: list[dict[frozenset[int], int]]) -> bool:
    return all(
        phi[j][moved_label(T, o, j)] == phi[o][T]
        for o in range(K)
        for j in range(K)
        if j != o
        for T in phi[o]
    )


@pytest.mark.parametrize(("K", "t"), [(3, 1), (4, 1), (4, 2)])
def test_no_rule_names_the_same_bytes_after_every_move(K, t):
    per = [labels(K, t, o) for o in range(K)]
    C = len(per[0])
    choices = [
        [dict(zip(per[o], perm, strict=True)) for perm in itertools.permutations(range(C))] for o in range(K)
    ]
    tried = 0
    for phi in itertools.product(*choices):
        tried += 1
        assert not consistent(K, t, list(phi))
    assert tried == math.factorial(C) ** K


def test_the_check_accepts_a_rule_where_one_exists():
    # t = K - 1: one label a record, one slot: the only rule is consistent
    for K in (3, 4):
        assert consistent(K, K - 1, [{labels(K, K - 1, o)[0]: 0} for o in range(K)])


@pytest.mark.parametrize(("K", "t"), [(3, 1), (4, 1), (4, 2), (5, 2)])
def test_the_update_relabels_as_stated(K, t):
    for o, j in itertools.permutations(range(K), 2):
        pp = piece_placement(placement_from_owner([o], K), M=t + 1)
        nxt = update_storage(pp, placement_from_owner([j], K))
        for p in range(pp.pieces):
            before = frozenset(w for w in range(K) if int(pp.holders[0, p]) >> w & 1) - {o}
            after = frozenset(w for w in range(K) if int(nxt.holders[0, p]) >> w & 1) - {j}
            assert after == moved_label(before, o, j)


def test_the_placement_keeps_eight_bytes_a_piece():
    owner = np.arange(100) % 6
    for P in (1, 2, 5):
        pp = piece_placement(placement_from_owner(owner.tolist(), 6), M=2, pieces=P)
        assert pp.holders.nbytes == 8 * 100 * P


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
