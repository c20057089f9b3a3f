"""The loads of a transition in bytes beside the counts (coded_shuffle.loads.byte_loads)."""

from fractions import Fraction

import pytest

from coded_shuffle.bounds import lower_bound
from coded_shuffle.loads import ByteLoads, byte_loads, padded_bytes
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, predict_bytes
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import plan_delivery, plan_from_matrix
from proofs.claim_14_byte_bound import brute_byte_bound


def brute_matrix(before, after, d, K) -> list[list[int]]:
    S = [[0] * K for _ in range(K)]
    for a, b, s in zip(before, after, d, strict=True):
        S[int(a)][int(b)] += int(s)
    return S


def test_the_byte_matrix_record_by_record(rng):
    for K in (1, 3, 7):
        before, after = rng.integers(0, K, 300), rng.integers(0, K, 300)
        d = rng.integers(1, 10**6, 300)
        a, b = placement_from_owner(before, K), placement_from_owner(after, K)
        assert shuffle_matrix(a, b, sizes=d).tolist() == brute_matrix(before, after, d, K)
    # sums near 2**53 stay exact (float64 weights would round past it)
    big = [2**52 - 1, 2**52 - 3, 1]
    a, b = placement_from_owner([0, 0, 1], 2), placement_from_owner([1, 1, 0], 2)
    assert shuffle_matrix(a, b, sizes=big).tolist() == [[0, 2**53 - 4], [1, 0]]


def test_loads_in_bytes_beside_the_counts(rng):
    N, K = 120, 4
    d = rng.integers(16, 1025, N)
    a, b = (epoch_placement(N, K, seed=7, epoch=e) for e in (0, 1))
    x = byte_loads(a, b, sizes=d)
    before, after = a.owner.tolist(), b.owner.tolist()
    moved = [(i, j, int(s)) for i, j, s in zip(before, after, d, strict=True) if i != j]
    assert x.uncoded_bytes == sum(s for _, _, s in moved)
    assert x.rates.uncoded == len(moved)
    missing = [sum(s for _, j, s in moved if j == k) for k in range(K)]
    assert x.missing_bytes.tolist() == missing and x.download_bound_bytes == max(missing)
    batch = [sum(int(s) for j, s in zip(after, d, strict=True) if j == k) for k in range(K)]
    assert x.batch_bytes.tolist() == batch
    assert x.lower_bound_bytes == brute_byte_bound(before, after, d, K)
    assert x.bound.value == lower_bound(shuffle_matrix(a, b)).value
    # a plan of whole records blind to the sizes: each symbol as long as its longest record
    sent = plan_delivery(a, b).transmissions()
    pad = sum(max(int(d[p]), int(d[q]) if q >= 0 else 0) for p, q in zip(sent[0], sent[1], strict=True))
    assert x.padded_bytes == pad
    assert x.lower_bound_bytes <= min(x.coded_bytes, x.padded_bytes) and x.coded_bytes <= x.uncoded_bytes
    assert x.download_bound_bytes <= x.lower_bound_bytes  # a worker's missing bytes: an ordering's share
    doc = x.to_dict()
    assert doc["coded"] == x.rates.coded and doc["padded_bytes"] == pad and doc["bytes"] == int(d.sum())


def test_with_storage(rng):
    N, K = 60, 4
    d = rng.integers(1, 100, N)
    a, b = (epoch_placement(N, K, seed=2, epoch=e) for e in (0, 1))
    x = byte_loads(a, b, sizes=d, storage=2)
    assert x.padded_bytes is None and x.rates.M == 2
    assert x.uncoded_bytes == Fraction(x.uncoded_bytes.numerator, x.uncoded_bytes.denominator)
    moved = [int(s) for i, j, s in zip(a.owner, b.owner, d, strict=True) if i != j]
    assert x.uncoded_bytes == Fraction(sum(moved) * (K - 2), K - 1)  # a piece in K - 1 is held
    assert x.download_bound_bytes == Fraction(int(x.missing_bytes.max()) * (K - 2), K - 1)


def test_predicted_times_in_bytes_are_the_engines_plan_not_the_padded_one():
    # 1 Mbit/s is 125,000 bytes a second. Worker 0 sends records of 1,000,000 and 10,000 bytes to
    # worker 1, which sends records of 10,000 and 1,000,000 bytes back.
    a, b = placement_from_owner([0, 0, 1, 1], 2), placement_from_owner([1, 1, 0, 0], 2)
    d = [1_000_000, 10_000, 10_000, 1_000_000]
    x = byte_loads(a, b, sizes=d)
    # blind to the sizes, the first records of each way are paired: two symbols of 1,000,000
    assert x.padded_bytes == 2_000_000
    # the engine pairs the two long records and the two short ones: 1,010,000 bytes, 8.08 s
    t = predict_bytes(a, b, sizes=d, network=Network.parse("master=1,down=1,multicast"))
    assert t.predicted_seconds["coded"] == pytest.approx(1_010_000 / 125_000)
    t = predict_bytes(a, b, sizes=d, network=Network.parse("up=1,down=1"))
    # each worker misses 1,010,000 bytes: the exchange takes 8.08 s, the bound too
    assert t.bound_seconds == pytest.approx(8.08) and t.predicted_seconds["exchange"] == pytest.approx(8.08)


def test_byte_loads_exceptions():
    a, b = placement_from_owner([0, 1], 2), placement_from_owner([1, 0], 2)
    with pytest.raises(ValueError, match="'sizes' must give the size of each of the N = 2"):
        byte_loads(a, b, sizes=[1, 2, 3])
    with pytest.raises(ValueError, match="'sizes' must hold sizes of at least 1 byte"):
        byte_loads(a, b, sizes=[0, 2])
    with pytest.raises(ValueError, match="'sizes' must hold integers"):
        shuffle_matrix(a, b, sizes=[1.5, 2])
    with pytest.raises(ValueError, match="'storage'"):
        byte_loads(a, b, sizes=[1, 2], storage=0)
    with pytest.raises(TypeError, match="'plan'"):
        padded_bytes(None, [1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'plan' must be a plan of whole records"):
        padded_bytes(plan_from_matrix([[0, 1], [1, 0]], subpackets=2), [1, 1])
    assert isinstance(byte_loads(a, b, sizes=[1, 2]), ByteLoads)


def test_the_library_page_prints_what_it_says(capsys):
    """docs/library.md's block on records of different sizes, run as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "library.md").read_text(encoding="utf-8")
    block, said = re.search(
        r"```python\n(import numpy as np\n.*?byte_loads.*?)```\n\nprints `([^`]*)`", text, re.S
    ).groups()
    exec(compile(block, "library.md", "exec"), {"__name__": "library"})
    assert capsys.readouterr().out.strip() == said
