"""Fewer pieces a record than labels: what they cost in load, and what they save on the wire and in decoding.

Two parts, in one run:

- **Loads** (``--workers``, default 8 and 16; ``N = --per-worker * K``; ``M = 2``; epochs 0 -> 3 of
  ``epoch_placement``): for each count of pieces ``P`` (1, 2, 4, 8 and every label
  ``C(K - 1, 1)``), the coded load of ``plan_storage`` in records (fractions of ``N``, median of the
  three transitions), over that with every label, the genie bound of the demand, and the storage
  of the fullest worker after the three updates (or ``--updates``) over ``M`` batches
  (``storage_excess``).
- **Bytes** (in process, ``engine.run``, 3 transitions after a first one left out): for a few
  ``K``, record sizes and ``N``, one batch stored and ``M = 2`` with the smallest piece
  (``engine.state.MIN_PIECE_BYTES``) at 256, 512, 1024 and 2048 B: the pieces a record, the bytes
  on the wire (payload and framing) and the decoding after the last frame (the busiest worker;
  medians).

The default of ``MIN_PIECE_BYTES`` (1 KiB) is read off the second part; docs/storage.md, "Fewer
pieces", has the figures.

Run:  python benchmarks/storage_pieces.py [--workers 8,16] [--per-worker 1000] [--updates 3] [--no-bytes]
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

import coded_shuffle.engine.state as state
from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import piece_placement, plan_storage, storage_excess, update_storage


def loads(K: int, N: int, updates: int, M: int = 2) -> None:
    C = math.comb(K - 1, M - 1)
    full = None
    for P in sorted({p for p in (1, 2, 4, 8) if p < C} | {C}):
        pp = piece_placement(epoch_placement(N, K, seed=0, epoch=0), M=M, pieces=P)
        coded, bound = [], []
        for e in (1, 2, 3):
            nxt = epoch_placement(N, K, seed=0, epoch=e)
            plan = plan_storage(pp, nxt)
            coded.append(plan.n_symbols / P / N)
            bound.append(plan.lower_bound().pieces / P / N)
            pp = update_storage(pp, nxt)
        for e in range(4, updates + 1):  # more updates, unplanned: how far the storage wanders
            pp = update_storage(pp, epoch_placement(N, K, seed=0, epoch=e))
        c, b = statistics.median(coded), statistics.median(bound)
        full = c if P == C else full
        print(f"  K = {K:2d}, N = {N:6d}, P = {P:2d}: coded {c:.4f} N, bound {b:.4f} N, coded / bound "
              f"{c / b:.4f}, storage after {max(updates, 3)} updates {storage_excess(pp):+.2%}",
              flush=True)  # fmt: skip
    assert full is not None
    print(f"  (coded over every label: see the P = {C} row, {full:.4f} N)")


def wire(K: int, B: int, N: int) -> None:
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (N, B), dtype=np.uint8))
    default = state.MIN_PIECE_BYTES
    try:
        for M, smallest in [(1, default), (2, 256), (2, 512), (2, 1024), (2, 2048)]:
            state.MIN_PIECE_BYTES = smallest
            ts = run(ds, K=K, epochs=4, seed=0, storage=M).transitions[1:]
            decode = statistics.median(t.timings["decode"] for t in ts)
            wire_mb = statistics.median(t.wire_bytes for t in ts) / 1e6
            label = "one batch stored    " if M == 1 else f"M = 2, pieces >= {smallest:4d}"
            print(f"  K = {K:2d}, B = {B}, N = {N}: {label}  P = {ts[0].units.subpackets:2d}  "
                  f"wire {wire_mb:6.2f} MB  decoding {1000 * decode:5.1f} ms", flush=True)  # fmt: skip
    finally:
        state.MIN_PIECE_BYTES = default


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="8,16")
    ap.add_argument("--per-worker", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=3, help="storage updates before its excess is read")
    ap.add_argument("--no-bytes", action="store_true")
    args = ap.parse_args()
    print("Loads with M = 2, random reshuffles (fractions of N):")
    for K in (int(k) for k in args.workers.split(",")):
        loads(K, args.per_worker * K, args.updates)
    if args.no_bytes:
        return
    print("Bytes on the wire and decoding, in process:")
    for K, B, N in [(8, 2048, 8000), (8, 2048, 32768), (16, 4096, 16384), (4, 3072, 16384)]:
        wire(K, B, N)


if __name__ == "__main__":
    main()
