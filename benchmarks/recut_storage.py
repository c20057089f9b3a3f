"""A change of ``K`` with a storage of ``M`` batches, delivered as a re-cut of the bytes the
workers hold, against its bounds and against a cold start; in process, one run, side by side.

For ``8 -> 6`` and ``6 -> 8`` workers storing ``--storage`` batches (the storage of epoch 3 at
``K``, as a job that started at epoch 0 holds it; the leavers' storage gone, the joiners
empty), :func:`coded_shuffle.engine.recut.recut_storage` gives every worker its storage of epoch 4
at ``K'``: the bytes it keeps, those from peers and from the source, beside the download bound
(the bytes of its new storage each worker lacks, summed; the largest is ``max down``), the source
bound (the bytes no survivor holds) and a cold start (the whole storage at ``K'`` from the
source). Then the same with the leavers serving what they alone hold before they go
(``leaving=``), and with the labels of the placement as they are (``labels="placement"``, against
the default ``kept``: each record's labels on the slots that keep the most bytes); for scale,
the exchange of one batch a worker across the same change
(:func:`~coded_shuffle.engine.elastic.elastic_run`, ``M = 1``) and an ordinary transition at
``K'`` with the storage. The largest download and upload of a worker bound the time on equal
links. In process the seconds are the CPU's (plan, copies, checks), not a network's.

Run:  python benchmarks/recut_storage.py [--mib 64] [--record-bytes 8192] [--storage 2]
"""

from __future__ import annotations

import argparse
import os

from coded_shuffle.engine import run, synthetic_dataset
from coded_shuffle.engine.elastic import elastic_run
from coded_shuffle.engine.holding import PieceStorage
from coded_shuffle.engine.recut import recut_storage
from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import update_storage


def _mb(n: float) -> str:
    return f"{n / 1e6:9.2f}"


def storage_of(ds, K: int, M: int, epoch: int, seed: int):
    """Every worker's storage of ``epoch`` at ``K`` (followed from epoch 0)."""
    st = PieceStorage(K=K, M=M, record_bytes=ds.record_bytes)
    held = st.start(epoch_placement(ds.N, K, seed=seed, epoch=0))
    for t in range(1, epoch + 1):
        held = update_storage(held, epoch_placement(ds.N, K, seed=seed, epoch=t))
    work = st.dataset(ds)
    return [work.cache(held.held_by(k)) for k in range(K)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64)
    ap.add_argument("--record-bytes", type=int, default=8192)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    B, M, seed = args.record_bytes, args.storage, args.seed
    N = int(args.mib * (1 << 20)) // B
    ds = synthetic_dataset(N, B, seed=seed)
    print(f"N = {N}, record = {B} B, dataset {N * B / 2**20:.1f} MiB, M = {M}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    warm = synthetic_dataset(48, 4096, seed=0)  # one-time costs before the clock
    recut_storage(warm, storage_of(warm, 4, 2, 0, 0)[:3], epoch_placement(48, 3, seed=0, epoch=1), K=4, M=2)
    head = ("K -> K", "leavers", "labels", "P -> P", "kept MB", "peers MB", "source MB", "down bnd",
            "src bnd", "cold MB", "/cold", "max down", "max up", "seconds")  # fmt: skip
    widths = (7, 8, 9, 7, 9, 9, 9, 9, 9, 9, 6, 9, 9, 8)
    print(" ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
    for K, K2 in ((8, 6), (6, 8)):
        old = storage_of(ds, K, M, 3, seed)
        nxt = epoch_placement(N, K2, seed=seed, epoch=4)
        holdings = [old[k] if k < K else None for k in range(K2)]
        cases = [("gone", "kept"), ("gone", "placement"), ("serve", "kept")] if K2 < K else [
            ("-", "kept"), ("-", "placement")]  # fmt: skip
        for leavers, labels in cases:
            leaving = old[K2:] if leavers == "serve" else []
            rep, _ = recut_storage(ds, holdings, nxt, K=K, M=M, leaving=leaving, labels=labels)
            assert rep.verified and rep.peer_bytes + rep.source_bytes == rep.download_bound
            assert rep.source_bytes == rep.source_bound
            moved = rep.peer_bytes + rep.source_bytes
            cells = (
                f"{K} -> {K2}", leavers, labels, f"{rep.pieces}->{rep.pieces_next}", _mb(rep.kept_bytes),
                _mb(rep.peer_bytes), _mb(rep.source_bytes), _mb(rep.download_bound), _mb(rep.source_bound),
                _mb(rep.storage_bytes), f"{moved / rep.storage_bytes:.3f}", _mb(max(rep.received)),
                _mb(max(rep.sent)), f"{rep.seconds:.3f}",
            )  # fmt: skip
            print(" ".join(c.strip().rjust(w) for c, w in zip(cells, widths, strict=True)))
    print("for scale, one batch a worker (M = 1), the exchange across the same change, and an ordinary")
    print("transition at K' with the storage (coded: the master's broadcast; exchange: the workers' bytes):")
    for K, K2 in ((8, 6), (6, 8)):
        (one,) = elastic_run(ds, workers=[K, K2], seed=seed, mode="exchange", start_epoch=3)
        print(f"{K:>2} -> {K2:<2} M = 1 exchange: peers {_mb(one.peer_bytes)} MB, source "
              f"{_mb(one.source_bytes)} MB")  # fmt: skip
    for K2 in (6, 8):
        for mode in ("coded", "exchange"):
            d = run(ds, K=K2, epochs=1, seed=seed, storage=M, mode=mode).transitions[0].to_dict()
            sent = d["exchange_bytes"] if mode == "exchange" else d["coded_bytes"]
            print(f"{K2:>2} -> {K2:<2} M = {M} {mode:>8}: {_mb(sent)} MB (the most a worker lacks "
                  f"{_mb(d['download_bound_bytes'])} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
