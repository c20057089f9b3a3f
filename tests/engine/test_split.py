"""The split delivery (``--mode split``): the master's coded multicast of a share of the moved records
while the workers exchange the rest, checked against a count record by record written out here."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import scheme_for
from coded_shuffle.engine.inprocess import run
from coded_shuffle.engine.schemes import SplitScheme, split_placements
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, predict, split_share, transition_times
from coded_shuffle.orders import epoch_placement, placement_from_owner

EDGE = Network.parse("master=1000,up=100,down=1000,multicast")


def _halves_by_hand(old: list[int], new: list[int], share: float) -> tuple[list[int], list[int]]:
    """The two halves, one record at a time: the first floor(share S_ij + 1/2) movers of each group."""
    K = max(old + new) + 1
    pairs = list(zip(old, new, strict=True))
    S = [[pairs.count((i, j)) for j in range(K)] for i in range(K)]
    taken = [[0] * K for _ in range(K)]
    coded, exchanged = list(old), list(old)
    for r, (i, j) in enumerate(zip(old, new, strict=True)):
        if i == j:
            continue
        if taken[i][j] < int(np.floor(share * S[i][j] + 0.5)):
            coded[r] = j
            taken[i][j] += 1
        else:
            exchanged[r] = j
    return coded, exchanged


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 0.69, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_the_halves_are_the_first_movers_of_every_group_and_together_the_shuffle(share, seed):
    rng = np.random.default_rng(seed)
    K, N = 5, 200
    old, new = rng.integers(0, K, N), rng.integers(0, K, N)
    coded, exchanged = split_placements(placement_from_owner(old, K), placement_from_owner(new, K), share)
    want = _halves_by_hand(old.tolist(), new.tolist(), share)
    assert (coded.owner.tolist(), exchanged.owner.tolist()) == want
    # every moved record moves in exactly one half, to its new holder
    moved_c, moved_e = coded.owner != old, exchanged.owner != old
    assert not np.any(moved_c & moved_e) and np.array_equal(moved_c | moved_e, old != new)


def test_a_split_is_verified_and_its_two_halves_carry_every_moved_record():
    K, N, B = 8, 8000, 64
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (N, B), dtype=np.uint8))
    rep = run(ds, K=K, epochs=2, seed=5, mode="split", network=EDGE)
    assert rep.verified
    for t in rep.transitions:
        p0, p1 = (epoch_placement(N, K, seed=5, epoch=e) for e in (t.epoch - 1, t.epoch))
        share = split_share(shuffle_matrix(p0, p1), network=EDGE)
        coded, exchanged = split_placements(p0, p1, share)
        n_exchanged = int(np.sum(exchanged.owner != p0.owner))
        n_coded = int(np.sum(coded.owner != p0.owner))
        assert t.mode == "split" and t.repairs == 0
        assert n_coded + n_exchanged == int(np.sum(p0.owner != p1.owner)) == t.uncoded_symbols
        assert t.exchange.exchange_bytes == n_exchanged * B  # each exchanged record once, alone
        # the master's symbols: XOR pairs of coded movers and the rest alone, so between half of them and all
        assert n_coded / 2 <= t.planned_symbols <= n_coded and t.wire.xor_symbols > 0
        assert t.planned_symbols < t.coded_symbols  # fewer than coding the whole shuffle
        assert t.on_network.choice == "split" and t.on_network.split_coded_share == pytest.approx(share)


def test_a_split_of_records_of_many_sizes_codes_its_half_by_size():
    """The coded half pairs records of similar sizes (its payload is that of the sized plan of
    that half, each symbol as long as its longer record); the exchanged half moves its records'
    own bytes; every record checked."""
    from coded_shuffle.plan import plan_delivery

    rng = np.random.default_rng(6)
    K, N = 4, 300
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(1, 600, N)])
    scheme = SplitScheme(EDGE)
    rep = run(ds, K=K, epochs=2, seed=8, mode=scheme)
    assert rep.verified
    for t in rep.transitions:
        p0, p1 = (epoch_placement(N, K, seed=8, epoch=e) for e in (t.epoch - 1, t.epoch))
        share = split_share(shuffle_matrix(p0, p1), network=EDGE)
        coded, exchanged = split_placements(p0, p1, share)
        a, b, _ = plan_delivery(p0, coded, sizes=ds.lengths).transmissions()
        lb = np.where(b >= 0, ds.lengths[np.maximum(b, 0)], 0)
        assert t.wire.payload_bytes == int(np.maximum(ds.lengths[a], lb).sum())
        moved = np.asarray(exchanged.owner) != np.asarray(p0.owner)
        assert t.exchange.exchange_bytes == int(ds.lengths[moved].sum())


def test_auto_chooses_the_split_where_it_is_predicted_fastest_and_not_without_multicast():
    S = shuffle_matrix(*(epoch_placement(8000, 8, seed=0, epoch=e) for e in (0, 1)))
    assert predict(S, record_bytes=1024, network=EDGE).choice == "split"
    plain = predict(S, record_bytes=1024, network=Network.parse("master=1000,up=100,down=1000"))
    assert plain.choice != "split" and plain.to_dict()["predicted_seconds"]["split"] is None
    switch = predict(S, record_bytes=1024, network=Network.parse("master=1000,up=1000,down=1000,multicast"))
    assert switch.choice == "exchange"  # a split at its end is the exchange: the exchange is named
    # the share split_share names is the one the prediction's split takes
    t = transition_times(
        S, record_bytes=1024, network=EDGE, coded_symbols=predict_coded(S), lower_bound_symbols=0
    )
    assert t.split_coded_share == pytest.approx(split_share(S, network=EDGE))


def predict_coded(S: np.ndarray) -> float:
    from coded_shuffle.plan import rates

    return float(rates(S).coded)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "Argument 'network' must be a Network that multicasts"),
        ({"network": Network.parse("master=1000,up=100,down=1000")}, "must be a Network that multicasts"),
        ({"network": EDGE, "storage": 2}, "needs a master and one batch a worker"),
        ({"network": EDGE, "peers": True}, "needs a master and one batch a worker"),
        ({"network": EDGE, "subpackets": 2}, "needs a master and one batch a worker"),
    ],
)
def test_a_split_it_cannot_run_is_refused_naming_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scheme_for("split", K=4, **kwargs)


def test_bad_arguments_of_the_split_functions_are_named():
    p = epoch_placement(40, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'share' must be from 0 to 1"):
        split_placements(p, p, 1.5)
    with pytest.raises(ValueError, match="same records on the same workers"):
        split_placements(p, epoch_placement(40, 5, seed=0, epoch=1), 0.5)
    with pytest.raises(ValueError, match="'network' must be a Network that multicasts"):
        split_share(np.zeros((2, 2), int), network=Network.parse("up=1,down=1"))
    assert isinstance(scheme_for("split", K=4, network=EDGE), SplitScheme)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--mode", "split"], "--mode split needs --network SPEC with multicast"),
        (["simulate", "--mode", "split", "--network", "up=100,down=1000"], "a --network that multicasts"),
        (["run", "-K", "2", "--mode", "split", "--network", str(EDGE)], "split needs --multicast GROUP:PORT"),
        (["run", "-K", "2", "--mode", "split", "--multicast", "239.1.1.1:5000"], "split needs --network"),
    ],
)
def test_the_commands_refuse_a_split_they_cannot_run_in_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and len(err.strip().splitlines()) == 1
