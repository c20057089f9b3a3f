"""The exchange's rounds: matchings that carry the demand, in whole units, at the port bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import ROUND_MERGE_FRACTION, exchange_rounds, is_round_schedule


def brute_carried(K, rounds):
    """Units each pair carries in ``rounds``, and whether every round is a partial matching,
    counted in plain Python (the oracle of the checker)."""
    got = [[0] * K for _ in range(K)]
    matching = True
    for r in rounds:
        receivers = [j for j, _ in r.values()]
        matching &= len(receivers) == len(set(receivers)) and all(n > 0 for _, n in r.values())
        for i, (j, n) in r.items():
            got[i][j] += n
    return got, matching


def brute_busiest(D):
    """The largest row or column sum, by loops."""
    K = len(D)
    rows = [sum(D[i][j] for j in range(K)) for i in range(K)]
    return max(rows + [sum(D[i][j] for i in range(K)) for j in range(K)])


def reshuffle_demand(N, K, seed):
    """Records moving ``i -> j`` between two epochs of a random reshuffle."""
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    D = np.zeros((K, K), dtype=np.int64)
    np.add.at(D, (np.asarray(p0.owner), np.asarray(p1.owner)), 1)
    np.fill_diagonal(D, 0)
    return D


@st.composite
def demands(draw, max_K=5, max_units=6):
    K = draw(st.integers(1, max_K))
    cells = draw(st.lists(st.integers(0, max_units), min_size=K * K, max_size=K * K))
    D = np.array(cells, dtype=np.int64).reshape(K, K)
    np.fill_diagonal(D, 0)
    return D


@settings(max_examples=60, deadline=None)
@given(demands(), st.sampled_from([0.0, 0.001, 0.2, 1.0]))
def test_the_rounds_carry_exactly_the_demand_one_send_and_one_receive_a_rank(D, merge):
    rounds = exchange_rounds(D, merge_below=merge)
    got, matching = brute_carried(D.shape[0], rounds)
    assert got == D.tolist() and matching
    assert is_round_schedule(D, rounds)
    assert all(isinstance(i, int) and isinstance(j, int) and isinstance(n, int)
               for r in rounds for i, (j, n) in r.items())  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(demands())
def test_unmerged_rounds_end_at_the_busiest_port(D):
    """Rounds lasting their largest transfer add up to the busiest line: the least any schedule
    can take, since the busiest port moves its units one at a time."""
    rounds = exchange_rounds(D, merge_below=0)
    assert sum(max(n for _, n in r.values()) for r in rounds) == brute_busiest(D.tolist())


@settings(max_examples=60, deadline=None)
@given(demands(max_K=4), st.data())
def test_the_checker_refuses_what_does_not_carry_the_demand(D, data):
    rounds = exchange_rounds(D)
    if not rounds:
        assert is_round_schedule(D, []) and not is_round_schedule(D, [{0: (len(D), 1)}])
        return
    k = data.draw(st.integers(0, len(rounds) - 1))
    i = data.draw(st.sampled_from(sorted(rounds[k])))
    j, n = rounds[k][i]
    short = [dict(r) for r in rounds]
    if n > 1:
        short[k][i] = (j, n - 1)
    else:
        del short[k][i]
    assert not is_round_schedule(D, short)
    more = [dict(r) for r in rounds]
    more[k][i] = (j, n + 1)
    assert not is_round_schedule(D, more)


def test_a_rank_receiving_twice_in_a_round_is_refused():
    D = [[0, 0, 1], [0, 0, 1], [0, 0, 0]]
    assert not is_round_schedule(D, [{0: (2, 1), 1: (2, 1)}])
    assert is_round_schedule(D, [{0: (2, 1)}, {1: (2, 1)}])
    assert not is_round_schedule(D, [{0: (0, 1)}, {1: (2, 1)}])  # to itself
    assert not is_round_schedule(D, "rounds")


def lasts(rounds, latency):
    """The time of ``rounds``, each lasting its largest transfer and ``latency``, by loops."""
    return sum(max(n for _, n in r.values()) + latency for r in rounds)


@pytest.mark.parametrize(("K", "lo", "hi", "most"), [(8, 20, 32, 16), (32, 60, 100, 35)])
def test_round_counts_on_random_reshuffles(K, lo, hi, most):
    """A decomposition needs at least ``K - 1`` rounds (a worker sends to ``K - 1`` others, one a
    round); Birkhoff-von Neumann rounds of random reshuffles take about 25 at ``K = 8`` and 88
    at ``K = 32`` (a flow-level study of all-to-all schedules). Folding the smallest into the
    others leaves about half as many, and, each round counted with a latency of
    ``ROUND_MERGE_FRACTION * L``, ends sooner than the decomposition itself."""
    for seed in range(2):
        D = reshuffle_demand(40 * K * K, K, seed)
        L = brute_busiest(D.tolist())
        plain = exchange_rounds(D, merge_below=0)
        assert lo <= len(plain) <= hi
        merged = exchange_rounds(D)
        assert is_round_schedule(D, merged) and len(merged) <= most
        latency = ROUND_MERGE_FRACTION * L
        assert lasts(merged, latency) < lasts(plain, latency)


@settings(max_examples=60, deadline=None)
@given(demands(max_K=6, max_units=40), st.sampled_from([0.01, 0.05, 0.2]))
def test_folded_rounds_never_last_longer(D, merge):
    """Each round counted with a latency of ``merge * L``, the folded rounds take no longer than
    the unfolded ones (the folding is kept only when they take less)."""
    L = brute_busiest(D.tolist()) if D.size else 0
    plain, merged = exchange_rounds(D, merge_below=0), exchange_rounds(D, merge_below=merge)
    assert is_round_schedule(D, merged)
    assert lasts(merged, merge * L) <= lasts(plain, merge * L)


def test_the_rounds_are_the_same_in_every_process():
    import subprocess
    import sys

    prog = (
        "import numpy as np\n"
        "from coded_shuffle.plan import exchange_rounds\n"
        "D = np.random.default_rng(5).integers(0, 50, (8, 8)); np.fill_diagonal(D, 0)\n"
        "print(exchange_rounds(D))\n"
    )
    outs = {subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}  # fmt: skip
    assert len(outs) == 1


def test_exchange_rounds_exceptions():
    with pytest.raises(ValueError, match="Argument 'demand' must be a square matrix"):
        exchange_rounds([[0, 1, 2]])
    with pytest.raises(TypeError, match="Argument 'demand' must be a square matrix of integers"):
        exchange_rounds([[0, 1.5], [1, 0]])
    with pytest.raises(TypeError, match="Argument 'demand'"):
        exchange_rounds(None)
    with pytest.raises(ValueError, match="Argument 'demand' must have no negative entry, not -1"):
        exchange_rounds([[0, -1], [1, 0]])
    with pytest.raises(ValueError, match="Argument 'demand' must have a zero diagonal"):
        exchange_rounds([[1, 1], [1, 0]])
    with pytest.raises(ValueError, match="Argument 'merge_below' must be from 0 to 1, not 2"):
        exchange_rounds([[0, 1], [1, 0]], merge_below=2)
    with pytest.raises(TypeError, match="Argument 'merge_below' must be a number, not str"):
        exchange_rounds([[0, 1], [1, 0]], merge_below="0")
    assert exchange_rounds(np.zeros((3, 3), dtype=np.int64)) == []
