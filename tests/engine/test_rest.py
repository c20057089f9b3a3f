"""coded_shuffle.engine.rest: the rest of an epoch after segments at several world sizes, and a
worker's cache file read back beside the master's table of checksums."""

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine.rest import (
    batches_of,
    deal_rest,
    load_worker_cache,
    rest_of_epoch,
    save_worker_cache,
    table_dataset,
)
from coded_shuffle.orders import epoch_order


@pytest.mark.parametrize("Ks", [(2, 3, 5), (4, 1, 4), (3, 3, 2, 6)])
def test_each_sample_of_an_epoch_once_across_several_changes(Ks):
    """A brute force: the workers read in step, ``s`` samples of their share a segment; what they
    read across every segment, and what is left, make the epoch's order exactly once."""
    n, seed, epoch = 41, 7, 3
    order = np.asarray(epoch_order(n, seed=seed, epoch=epoch))
    rng = np.random.default_rng(sum(Ks))
    segments: list[tuple[int, int]] = []
    read: list[int] = []
    shares = np.array_split(order, Ks[0])  # the batches at K_0: contiguous runs, first ones longer
    for K, K_next in zip(Ks[:-1], Ks[1:], strict=True):
        s = int(rng.integers(0, max(b.size for b in shares) + 1))
        read += [int(i) for b in shares for i in b[:s]]
        segments.append((K, s))
        shares = rest_of_epoch(n, seed=seed, epoch=epoch, segments=segments, K_next=K_next)
        assert len(shares) == K_next
        sizes = [b.size for b in shares]
        assert max(sizes) - min(sizes) <= 1
    left = [int(i) for b in shares for i in b]
    assert sorted(read + left) == list(range(n)) and len(read + left) == n


def test_deal_rest_keeps_what_a_staying_worker_holds():
    got = deal_rest([np.array([1, 2, 3, 4]), np.array([5]), np.array([6, 7])], 2)
    assert [g.tolist() for g in got] == [[1, 2, 3, 4], [5, 6, 7]]


def test_rest_exceptions():
    with pytest.raises(ValueError, match="'segments' must be a sequence of at least one"):
        rest_of_epoch(10, seed=0, epoch=0, segments=[], K_next=2)
    with pytest.raises(ValueError, match="'segments' must hold .K, samples. pairs"):
        rest_of_epoch(10, seed=0, epoch=0, segments=[(2, 1, 0)], K_next=2)
    with pytest.raises(ValueError, match="'segments' must be at least 1"):
        rest_of_epoch(10, seed=0, epoch=0, segments=[(0, 1)], K_next=2)


def test_a_worker_cache_file_read_back_against_the_table(tmp_path):
    """A worker keeps its batch beside the master's checksums only (no rows of the others)."""
    ds = load_dataset(np.arange(60, dtype=np.uint8).reshape(12, 5))
    table = table_dataset(ds.checksums, ds.record_bytes)
    ids = np.array([7, 2, 9])
    save_worker_cache(tmp_path, 1, ids, ds.data[ids], table, epoch=4, seed=3)
    held, note = load_worker_cache(tmp_path, 1, table, seed=3)
    assert note is None and held is not None
    assert held.ids.tolist() == [2, 7, 9] and np.array_equal(np.asarray(held.data), ds.data[[2, 7, 9]])
    assert load_worker_cache(tmp_path, 0, table, seed=3) == (None, None)  # no file: nothing, silently
    held, note = load_worker_cache(tmp_path, 1, table, seed=4)  # another job's seed
    assert held is None and note is not None and note.endswith("seed 3, not 4. Treated as absent.")
    other = table_dataset(ds.checksums[::-1].copy(), ds.record_bytes)  # another dataset, same size
    held, note = load_worker_cache(tmp_path, 1, other, seed=3)
    assert held is None and "another dataset" in str(note)
    path = tmp_path / "worker-1.cache"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # the last row altered: that record dropped, the others used
    path.write_bytes(bytes(raw))
    held, note = load_worker_cache(tmp_path, 1, table, seed=3)
    assert held is not None and held.ids.tolist() == [2, 7] and "1 record(s) fail" in str(note)
    path.write_bytes(bytes(raw[:100]))  # cut short
    held, note = load_worker_cache(tmp_path, 1, table, seed=3)
    assert held is None and str(note).endswith("Treated as absent.")


def test_the_rest_of_an_epoch_of_batches_cut_by_bytes():
    """Batches of equal bytes (``balance="bytes"``): the epoch's batches are its byte cut (a brute
    force: cut ``k`` at the position whose bytes before it are nearest ``k / K`` of the total, the
    lower on a tie), and what the workers read of them and what is left make the epoch once."""
    n, seed, epoch, K = 37, 2, 1, 3
    sizes = np.random.default_rng(5).integers(1, 400, n)
    order = np.asarray(epoch_order(n, seed=seed, epoch=epoch))
    P = [0, *np.cumsum(sizes[order]).tolist()]
    cuts = [0, *(min(range(n + 1), key=lambda p: abs(K * P[p] - k * P[-1])) for k in range(1, K)), n]
    want = [order[a:b].tolist() for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    got = batches_of(n, K, seed=seed, epoch=epoch, sizes=sizes, balance="bytes")
    assert [b.tolist() for b in got] == want and [len(b) for b in want] != [13, 12, 12]  # not by count
    for s, K_next in ((5, 2), (11, 4)):  # the shortest batch read whole, then past its end
        read = [i for b in want for i in b[:s]]
        left = rest_of_epoch(n, seed=seed, epoch=epoch, segments=[(K, s)], K_next=K_next, sizes=sizes,
                             balance="bytes")  # fmt: skip
        assert sorted(read + [int(i) for b in left for i in b]) == list(range(n))


def test_a_worker_cache_file_of_records_of_many_sizes(tmp_path):
    """Records of many sizes: the worker's table holds their lengths beside the checksums; its
    rows are kept zero-padded and come back at their lengths."""
    records = [b"a", b"bcdef", b"", b"ghij", b"klmnopq", b"rs"]
    ds = load_dataset(records)
    table = table_dataset(ds.checksums, ds.record_bytes, ds.lengths)
    ids = np.array([4, 1, 3])
    save_worker_cache(tmp_path, 0, ids, ds.data[ids], table, epoch=2, seed=9)
    held, note = load_worker_cache(tmp_path, 0, table, seed=9)
    assert note is None and held is not None and held.ids.tolist() == [1, 3, 4]
    assert [held.record(i) for i in (1, 3, 4)] == [records[1], records[3], records[4]]
    fixed = table_dataset(ds.checksums, ds.record_bytes)  # a table without lengths: another job
    held, note = load_worker_cache(tmp_path, 0, fixed, seed=9)
    assert held is None and "records of many sizes, not of one size" in str(note)
