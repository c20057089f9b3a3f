"""Sorted shards (first half one language, second half another): shard-aware order vs full shuffle.

Source: the scenario of a published study of MosaicML StreamingDataset shuffle quality
("MosaicMLのStreamingDatasetのシャッフルに関する考察", docs/algorithms.md): a multilingual corpus
written as shards in language order, the first half of the shards Japanese and the second
half English, read with a shard-aware shuffle (``py1br``, ``py1e``: shuffle inside blocks of
a canonical node) or a full shuffle (``naive``). The study
measured the language mix of training batches; here we add what each order costs on the link
when K workers each hold one contiguous batch of the epoch order (Attia and Tandon, Allerton
2016, arXiv:1609.09823): the shuffle matrix between two consecutive epochs, its uncoded and
coded loads and the lower bound.

Run: ``python examples/sorted_shards.py``
"""

import numpy as np

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import mixture_deviation, placement_from_permutation, shard_order
from coded_shuffle.plan import rates

K = 4  # workers
shard_sizes = [100] * 100  # 100 shards of 100 samples; shards 0..49 Japanese, 50..99 English
N = sum(shard_sizes)
split = N // 2  # sample ids below split are Japanese
seed, block = 7, 1000

configs = [
    ("naive", 1, "full shuffle"),
    ("py1br", K, "blocks inside K canonical nodes"),
    ("py1e", K, "expanded range inside K canonical nodes"),
    ("py1br", 1, "blocks inside one canonical node"),
]
print(f"N = {N} samples in {len(shard_sizes)} shards, K = {K} workers, block size {block}")
print(f"{'order':>6} {'nodes':>5} {'mix dev %':>9} {'moved':>6} {'coded':>6} {'bound':>6}  description")
results = {}
for algo, nodes, text in configs:
    orders = [
        shard_order(algo, shard_sizes, canonical_nodes=nodes, seed=seed, epoch=t, block_size=block)
        for t in (0, 1)
    ]
    dev = mixture_deviation(orders[1], split=split, batch_size=200)["mean_deviation_pct"]
    S = shuffle_matrix(placement_from_permutation(orders[0], K), placement_from_permutation(orders[1], K))
    r = rates(S, strategy="exact")
    lb = lower_bound(S).value
    results[(algo, nodes)] = (dev, r.uncoded, r.coded, lb)
    print(f"{algo:>6} {nodes:>5} {dev:>9.2f} {r.uncoded:>6} {r.coded:>6} {lb:>6}  {text}")

naive = results[("naive", 1)]
local = results[("py1br", K)]
print(f"a shard-aware order with one canonical node per worker keeps every sample on its worker "
      f"(0 symbols) but mixes batches {local[0] / naive[0]:.1f}x worse than a full shuffle, "
      f"which costs {naive[2]} coded symbols per epoch ({naive[1]} uncoded, bound {naive[3]})")

one_node = results[("py1br", 1)]
print(f"with a single canonical node the block shuffle moves {one_node[1]} samples ({one_node[2]} coded) "
      f"and still mixes {one_node[0] / naive[0]:.1f}x worse than the full shuffle")

assert one_node[1] > 0.9 * naive[1] and one_node[0] > 2 * naive[0]
assert local[1] == 0 and results[("py1e", K)][1] == 0  # node spans are fixed for the run
assert local[0] > 2 * naive[0]
assert naive[2] == naive[3] and naive[1] > 1.9 * naive[2]
assert np.isclose(naive[1] / N, (K - 1) / K, atol=0.02)
