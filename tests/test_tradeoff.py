import json

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import OrderSpec, epoch_order, order_placement
from coded_shuffle.tradeoff import order_link_cost, order_tradeoff


def brute_uncoded(order, K, N, seed, epoch):
    spec = OrderSpec(order, shard_size=50, block_size=100)
    a = order_placement(N, K, seed=seed, epoch=epoch, spec=spec).owner
    b = order_placement(N, K, seed=seed, epoch=epoch + 1, spec=spec).owner
    return int(sum(1 for n in range(N) if a[n] != b[n]))


@pytest.mark.parametrize("order", ["permutation", "py1s", "py1e"])
def test_link_cost_against_direct_count(order):
    row = order_link_cost(order, K=4, shards=20, shard_size=50, block_size=100, batches=5, batch_size=40)
    assert row["uncoded"] == brute_uncoded(order, 4, 1000, 0, 0)
    assert row["lower_bound"] <= row["coded"] <= row["paired"] <= row["uncoded"]
    assert row["epoch"] == 1 and row["N"] == 1000


def test_shard_local_order_moves_nothing_when_nodes_are_workers():
    # py1s keeps every sample in its canonical node's span: with one node per worker, nothing moves.
    row = order_link_cost("py1s", K=4, shards=8, shard_size=25, canonical_nodes=4, batches=2, batch_size=10)
    assert row["uncoded"] == row["coded"] == 0
    spec = OrderSpec("py1s", shard_size=25, canonical_nodes=4)
    S = shuffle_matrix(
        order_placement(200, 4, seed=0, epoch=0, spec=spec),
        order_placement(200, 4, seed=0, epoch=1, spec=spec),
    )
    assert np.count_nonzero(S - np.diag(np.diag(S))) == 0
    assert sorted(epoch_order(200, seed=0, epoch=1, spec=spec).tolist()) == list(range(200))


def test_quality_and_orders_cli(capsys):
    code = main(
        [
            "quality",
            "--order",
            "py1e",
            "--shards",
            "20",
            "--shard-size",
            "100",
            "--block-size",
            "300",
            "--batches",
            "5",
            "--batch-size",
            "50",
            "--seeds",
            "2",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["algo"] == "py1e"
    for key in ("mean_deviation_pct", "max_deviation_pct", "seconds", "mean_shards_per_batch"):
        assert key in out
    assert out["over_seeds"]["seeds"] == [0, 1]  # seeds from the default 0
    small = "-K 3 --shards 10 --shard-size 30 --block-size 60 --batch-size 20 --batches 3".split()
    code = main(["orders", "--orders", "naive,py1br", *small, "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and [r["order"] for r in rows] == ["naive", "py1br"]
    code = main(["orders", *small])
    out = capsys.readouterr().out
    assert code == 0 and "permutation" in out and "py1e" in out


def test_tradeoff_exceptions(capsys):
    with pytest.raises(ValueError, match="'order'"):
        order_link_cost("sorted", K=2, shards=4, shard_size=4)
    with pytest.raises(ValueError, match="'shards'"):
        order_link_cost("py1s", K=2, shards=1, shard_size=4)
    with pytest.raises(ValueError, match="at least K"):
        order_link_cost("py1s", K=50, shards=2, shard_size=4)
    with pytest.raises(ValueError, match="'orders'"):
        order_tradeoff([], K=2, shards=4, shard_size=4)
    for argv, needle in [
        (["quality", "--order", "feistel"], "--order must be one of"),
        (["quality", "--order", "py1s", "--shards", "1"], "--shards"),
        (["quality"], "--order is required"),
        (["orders", "--orders", "py1s,zz"], "--orders"),
        (["orders", "--workers", "0"], "--workers"),
        (["orders", "--shards", "2", "--shard-size", "2", "-K", "8"], "at least --workers"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_plot_orders(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "orders.png"
    argv = ["plot", "orders", "-K", "2", "--shards", "4", "--shard-size", "20", "--block-size", "10"]
    assert main([*argv, "-o", str(out)]) == 0
    assert out.stat().st_size > 1000 and out.read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().out.strip() == str(out)
    assert main([*argv, "-o", str(tmp_path / "orders.txt")]) == 2
    assert "--output" in capsys.readouterr().err


def test_tradeoff_progress():
    from coded_shuffle.tradeoff import LINK_COST_STEPS

    done: list[int] = []
    options = dict(K=2, shards=4, shard_size=10, batches=2, batch_size=5)
    rows = order_tradeoff(["naive", "py1s"], progress=done.append, **options)
    assert done == list(range(1, 2 * LINK_COST_STEPS + 1))
    assert [r["coded"] for r in rows] == [r["coded"] for r in order_tradeoff(["naive", "py1s"], **options)]


def test_order_link_cost_in_bytes():
    opts = dict(K=4, shards=8, shard_size=25, batches=2, batch_size=10)
    row = order_link_cost("py1s", **opts)
    # records of one size, by count: every load in bytes is 7 times the load in records
    same = order_link_cost("py1s", sizes=np.full(200, 7), **opts)
    assert [same[k] for k in ("uncoded", "coded", "lower_bound")] == [
        row[k] for k in ("uncoded", "coded", "lower_bound")
    ]
    assert [same[f"{k}_bytes"] for k in ("uncoded", "coded", "lower_bound")] == [
        7 * row[k] for k in ("uncoded", "coded", "lower_bound")
    ]
    sizes = np.random.default_rng(3).integers(1, 500, 200)
    by_bytes = order_link_cost("py1s", sizes=sizes, balance="bytes", **opts)
    assert by_bytes["balance"] == "bytes"
    assert by_bytes["lower_bound_bytes"] <= by_bytes["coded_bytes"] <= by_bytes["uncoded_bytes"]
    with pytest.raises(ValueError, match="'balance'"):
        order_link_cost("py1s", sizes=sizes, balance="tokens", **opts)
    with pytest.raises(ValueError, match="'sizes' must give the size of each of the N = 200"):
        order_link_cost("py1s", sizes=sizes[:10], **opts)
