"""Sub-packets: records cut into q pieces, cycles packed in q Omega, loads exact in records."""

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.bounds import lower_bound
from coded_shuffle.errors import InvalidPlanError
from coded_shuffle.matrix import leftover_matrix
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import (
    DeliveryPlan,
    decoding_steps,
    is_cycle_packing,
    plan_delivery,
    plan_from_matrix,
    rates,
    verify_plan,
)
from tests.cases import OMEGA_GAP_K7, OMEGA_GAP_K7_VALUES, S_GAP_K7
from tests.oracles import brute_max_packing


def test_k7_two_pieces_send_ten_and_a_half():
    # The K = 7 gap matrix (tests/cases.py). Reference: brute force packs 9 cycles in 2 Omega (and
    # 4 in Omega); W = 15, P = 0.
    v = OMEGA_GAP_K7_VALUES
    omega = np.array(OMEGA_GAP_K7)
    assert brute_max_packing((2 * omega).tolist()) == v["max_packing_of_copies"][2]
    assert brute_max_packing(omega.tolist()) == v["max_packing"]
    whole = rates(S_GAP_K7, strategy="exact")
    half = rates(S_GAP_K7, strategy="exact", subpackets=2)
    assert (whole.coded, whole.subpackets) == (v["coded"], 1)
    assert (half.uncoded, half.pairs, half.paired, half.cycles_used) == (
        v["uncoded"],
        v["pairs"],
        v["uncoded"] - v["pairs"],
        v["max_packing_of_copies"][2],
    )
    assert half.coded == v["coded_halves"] and isinstance(half.coded, Fraction)
    assert half.uncoded_leftovers == 0 and half.subpackets == 2
    assert lower_bound(S_GAP_K7).value == v["lower_bound"] <= half.coded
    plan = plan_from_matrix(S_GAP_K7, strategy="exact", subpackets=2)
    verify_plan(plan)
    assert (plan.n_symbols, plan.load, plan.subpackets) == (2 * v["coded_halves"], v["coded_halves"], 2)
    # every piece index names piece k of point p as p * 2 + k; both pieces of every moved point arrive
    a, b = plan.placement_t.owner, plan.placement_t1.owner
    got = np.concatenate([plan.pair_x, plan.pair_y, plan.cycle_points, plan.uncoded_points])
    assert sorted(got.tolist()) == sorted(2 * p + k for p in np.flatnonzero(a != b).tolist() for k in (0, 1))


def test_greedy_gains_nothing_from_copies_here():
    # shortest-cycles-first packs q copies of its own packing of Omega on this case
    v = OMEGA_GAP_K7_VALUES
    for q in (1, 2, 3):
        r = rates(S_GAP_K7, subpackets=q)
        assert r.cycles_used == v["max_packing"] * q and r.coded == v["coded"]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.integers(2, 4).flatmap(
        lambda K: st.tuples(
            st.lists(st.lists(st.integers(0, 3), min_size=K, max_size=K), min_size=K, max_size=K),
            st.integers(1, 3),
        )
    )
)
def test_loads_exact_ordered_and_plans_verified(args):
    S, q = args
    omega = leftover_matrix(S)
    for strategy in ("greedy", "exact"):
        r = rates(S, strategy=strategy, subpackets=q)
        assert r.subpackets == q
        assert is_cycle_packing(q * omega, r.packing.cycles, r.packing.counts)
        assert r.coded == r.paired - Fraction(r.cycles_used, q)
        assert r.uncoded_leftovers == Fraction(q * r.leftovers - r.packing.covered, q)
        assert lower_bound(S).value <= r.coded <= r.paired <= r.uncoded
        assert r.coded <= rates(S, strategy=strategy).coded
        if strategy == "exact":
            assert r.cycles_used == brute_max_packing((q * omega).tolist())
        if sum(map(sum, S)):
            plan = plan_from_matrix(S, strategy=strategy, subpackets=q)
            verify_plan(plan)
            assert plan.load == r.coded and plan.n_symbols == q * r.coded


def test_pieces_of_random_epochs_and_decoding_steps():
    a = epoch_placement(60, 5, seed=3, epoch=0)
    b = epoch_placement(60, 5, seed=3, epoch=1)
    plan = plan_delivery(a, b, strategy="exact", subpackets=3)
    verify_plan(plan)
    assert plan.load == rates(plan.S, strategy="exact", subpackets=3).coded
    # each worker's steps use only pieces it caches or has recovered, and reach all its new pieces
    for w in range(5):
        known = {3 * p + k for p in np.flatnonzero(a.owner == w).tolist() for k in range(3)}
        for _, held, got in decoding_steps(plan, w):
            assert held == -1 or held in known
            known.add(got)
        new = {3 * p + k for p in np.flatnonzero((b.owner == w) & (a.owner != w)).tolist() for k in range(3)}
        assert new and new <= known


def tamper(plan, **fields):
    kept = {f: getattr(plan, f) for f in DeliveryPlan.__dataclass_fields__}
    kept.update(fields)
    return DeliveryPlan(**kept)


def test_verify_plan_checks_the_pieces():
    plan = plan_from_matrix([[1, 3, 2, 0], [1, 1, 0, 2], [1, 0, 1, 3], [2, 1, 2, 0]], subpackets=2)
    verify_plan(plan)
    # the same arrays read as whole points are wrong
    with pytest.raises(InvalidPlanError, match="subpackets"):
        verify_plan(tamper(plan, subpackets=1))
    # swap the two pieces of a pair symbol with the pieces of another point: not held by pair_i
    x = plan.pair_x.copy()
    x[0] = plan.pair_y[0]
    with pytest.raises(InvalidPlanError, match="order-2"):
        verify_plan(tamper(plan, pair_x=x))
    # one piece left out: its point is never whole
    with pytest.raises(InvalidPlanError, match="never delivered"):
        verify_plan(
            tamper(
                plan,
                pair_x=plan.pair_x[1:],
                pair_y=plan.pair_y[1:],
                pair_i=plan.pair_i[1:],
                pair_j=plan.pair_j[1:],
            )
        )
    # a piece index past N q
    with pytest.raises(InvalidPlanError, match="outside"):
        verify_plan(tamper(plan, uncoded_points=np.array([8 * 2 * 4]), uncoded_from=np.array([0]),
                           uncoded_to=np.array([1])))  # fmt: skip


def test_subpackets_exceptions():
    a = placement_from_owner([0, 1, 1, 0], 2)
    with pytest.raises(ValueError, match="'subpackets' must be at least 1, not 0"):
        rates([[0, 1], [1, 0]], subpackets=0)
    with pytest.raises(TypeError, match="'subpackets' must be an int, not float"):
        plan_delivery(a, a, subpackets=2.0)
    with pytest.raises(TypeError, match="'subpackets'"):
        plan_from_matrix([[0, 1], [1, 0]], subpackets=True)
    cycle = [[0, 2**40, 0], [0, 0, 2**40], [2**40, 0, 0]]  # 3 * 2**40 leftovers
    with pytest.raises(ValueError, match="'subpackets' must be at most 2730 for this matrix"):
        rates(cycle, subpackets=2**30)
    assert rates(cycle, subpackets=2730).coded == 2 * 2**40  # 2730 * 3 * 2**40 < 2**53 pieces: exact
    assert rates([[0, 2**40], [2**40, 0]], subpackets=2**30).coded == 2**40  # no leftover to cut


def test_cli_rate_subpackets(tmp_path, capsys):
    from coded_shuffle.cli import main

    f = tmp_path / "k7.json"
    f.write_text(json.dumps(S_GAP_K7))
    rows = {}
    for q in (1, 2):
        argv = ["rate", "--matrix", str(f), "--strategy", "exact", "--subpackets", str(q), "--json"]
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert err == ""
        (rows[q],) = [json.loads(line) for line in out.splitlines()]
    assert (rows[1]["coded"], rows[1]["coded_fraction"], rows[1]["subpackets"]) == (11, "11", 1)
    assert (rows[2]["coded"], rows[2]["coded_fraction"], rows[2]["subpackets"]) == (10.5, "21/2", 2)
    assert rows[2]["cycles"] == 9 and rows[2]["lower_bound"] == 10 and rows[2]["uncoded_leftovers"] == 0
    assert main(["rate", "--matrix", str(f), "--strategy", "exact", "--subpackets", "2"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[1].split()[7] == "10.50"  # the table rounds; --json keeps the exact "21/2"
    assert "records cut into 2 pieces" in out
    assert main(["rate", "--subpackets", "0"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("coded-shuffle: error: argument --subpackets:") and err.count("\n") == 1


def test_simulate_pieces_end_to_end():
    from coded_shuffle.engine import simulate
    from coded_shuffle.matrix import shuffle_matrix

    q, B, N, K = 3, 12, 60, 5
    rep = simulate(K=K, N=N, record_bytes=B, epochs=2, seed=1, strategy="exact", subpackets=q)
    assert rep.verified and rep.subpackets == q
    for t in rep.transitions:
        S = shuffle_matrix(*(epoch_placement(N, K, seed=1, epoch=e) for e in (t.epoch - 1, t.epoch)))
        assert (t.N, t.record_bytes, t.units.subpackets, t.records_checked, t.repairs) == (N, B, q, N, 0)
        assert t.coded_symbols == q * rates(S, strategy="exact", subpackets=q).coded
        assert t.lower_bound == q * lower_bound(S).value <= t.coded_symbols
        assert t.uncoded_symbols == q * rates(S).uncoded
        assert t.uncoded_bytes == rates(S).uncoded * B


def test_k7_records_in_halves_decode_and_verify():
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import initial_caches, transition
    from coded_shuffle.matrix import placements_from_matrix

    records = np.random.default_rng(11).integers(0, 256, (21, 16), dtype=np.uint8)
    halves = load_dataset(records.reshape(42, 8))  # piece k of record n is row 2 n + k
    p0, p1 = (placement_from_owner(np.repeat(p.owner, 2), 7) for p in placements_from_matrix(S_GAP_K7))
    rep, caches = transition(halves, initial_caches(halves, p0), p0, p1, epoch=1, strategy="exact")
    assert rep.verified and rep.coded_symbols == 21 and rep.repairs == 0  # 21 halves: 21/2 records
    for k, cache in enumerate(caches):  # every worker holds its next batch, records whole again
        got = cache.data[cache.rows(cache.ids)].reshape(-1, 16)
        assert np.array_equal(got, records[np.flatnonzero(p1.owner[::2] == k)])


def test_simulate_pieces_exceptions(capsys):
    from coded_shuffle.cli import main
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import run, simulate

    with pytest.raises(ValueError, match="'subpackets' must divide the record width of 10 bytes, not 3"):
        simulate(K=2, N=8, record_bytes=10, epochs=1, seed=0, subpackets=3)
    with pytest.raises(ValueError, match="'subpackets' must be 1 for variable-length records"):
        run(load_dataset([b"ab", b"cdef", b"", b"xy"]), K=2, epochs=1, seed=0, subpackets=2)
    with pytest.raises(ValueError, match="'subpackets' must be at least 1"):
        simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0, subpackets=0)
    assert main(["simulate", "-K", "3", "-N", "30", "-B", "10", "--subpackets", "3"]) == 2
    _, err = capsys.readouterr()
    assert err == "coded-shuffle: error: --subpackets must divide --record-bytes (10), not 3\n"
    assert main(["simulate", "-K", "3", "-N", "30", "-B", "8", "--subpackets", "2", "--json"]) == 0
    out, _ = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3 and all(r["verified"] and r["subpackets"] == 2 for r in rows)


def test_piece_plans_have_gf2_certificates_and_encode_only_pieces():
    from coded_shuffle.certificates import certify_plan
    from coded_shuffle.codec import encode_plan, load_dataset

    plan = plan_from_matrix(S_GAP_K7, strategy="exact", subpackets=2)
    certs = certify_plan(plan)  # galois ranks over the 42 halves: every worker decodes its halves
    assert all(c.decodable for c in certs)
    assert sum(c.needed for c in certs) == 30
    records = np.zeros((21, 8), dtype=np.uint8)
    with pytest.raises(ValueError, match="'dataset' must hold the plan's N x subpackets = 42 pieces"):
        encode_plan(plan, load_dataset(records), epoch=1)
    assert len(encode_plan(plan, load_dataset(records.reshape(42, 4)), epoch=1)) == 1
