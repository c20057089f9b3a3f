"""The planner's time and memory with a storage of ``M`` batches against the plan of one batch.

For ``N`` records on ``K`` workers (default ``N = 10^6``, ``K = 16``, ``M = 2``, issue 24), epochs
0 -> 1 of ``epoch_placement``, in one process, each timed ``--repeats`` times (the median kept)
with the peak of the memory it allocates (one more call under ``tracemalloc``, which numpy reports
to); every compiled kernel is loaded before:

- ``plan_delivery`` (one batch stored, pairs and cycles), its compiled kernels loaded first;
- ``plan_storage`` with a piece for every label (``C(K - 1, t)`` pieces a record, 256 B a piece
  needs records of ``256 C`` bytes);
- ``plan_storage`` with the pieces ``engine.state.storage_pieces`` gives records of
  ``--record-bytes`` (default 1 KiB: 4 pieces at ``K = 16``), and the genie bound of its demand;

and the loads of both in records, the bound, and how far a worker's storage is above ``M``
batches after ``--epochs`` updates (``storage_excess``).

Measured (2 shared cores, ``N = 10^6``, ``K = 16``, ``M = 2``): see docs/storage.md, "Measured".

Run:  python benchmarks/storage_planner.py [--points 1000000] [--workers 16] [--storage 2]
          [--record-bytes 1024] [--repeats 1] [--epochs 3] [--cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from coded_shuffle.engine.state import storage_pieces
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery
from coded_shuffle.storage import piece_placement, plan_storage, storage_excess, update_storage

#: The CPU seconds of every call :func:`measured` timed, by label (``--cpu`` prints them).
CPU: dict[str, list[float]] = {}


def measured(fn, repeats, label=""):  # type: ignore[no-untyped-def]
    """``(median seconds, peak MB allocated, result)``: the times with nothing watching, the peak
    from one more call under ``tracemalloc`` (which slows the allocations it counts). The CPU
    seconds of the process in each timed call go to :data:`CPU` (on a shared machine they move
    less than the wall time)."""
    times, out = [], None
    for _ in range(repeats):
        tic, cpu = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - tic)
        CPU.setdefault(label, []).append(time.process_time() - cpu)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="print the CPU seconds of every timed call, by plan")
    args = ap.parse_args()
    N, K, M = args.points, args.workers, args.storage
    a, b = (epoch_placement(N, K, seed=0, epoch=t) for t in (0, 1))
    plan_delivery(a, b)  # the compiled kernels load here, and the storage planner's
    small = [epoch_placement(100 * K, K, seed=0, epoch=t) for t in (0, 1)]
    plan_storage(piece_placement(small[0], M=M, pieces=1), small[1])
    t1, m1, p1 = measured(lambda: plan_delivery(a, b), args.repeats, "plan_delivery")
    print(f"N = {N}, K = {K}, M = {M}, epochs 0 -> 1 (times: median of {args.repeats}; MB: peak allocated)")
    print(f"  plan_delivery (M = 1)        {t1:8.3f} s {m1:7.0f} MB   coded {p1.n_symbols / N:.4f} N")
    P, width = storage_pieces(args.record_bytes, K, M)
    for name, pieces in (("every label", None), (f"{P} piece{'s' if P > 1 else ''} ({width} B)", P)):
        pp = piece_placement(a, M=M, pieces=pieces)
        tm, mm, plan = measured(lambda pp=pp: plan_storage(pp, b), args.repeats, f"plan_storage, {name}")
        tb, mb, lb = measured(lambda plan=plan: plan.lower_bound(), 1, f"lower_bound, {name}")
        C = pp.pieces
        coded, bound = plan.n_symbols / C / N, lb.pieces / C / N
        print(
            f"  plan_storage, {name:14s} {tm:8.3f} s {mm:7.0f} MB   coded {coded:.4f} N ({plan.chosen}), "
            f"bound {bound:.4f} N{'' if lb.exact else '*'} ({tb:.2f} s, {mb:.0f} MB): "
            f"{tm / t1:.0f} x plan_delivery, coded / bound {coded / bound:.4f}"
        )
        for e in range(1, args.epochs + 1):
            pp = update_storage(pp, epoch_placement(N, K, seed=0, epoch=e))
        print(f"  {'':29s} storage after {args.epochs} updates: {storage_excess(pp):+.2%} over {M} batches")
    if args.cpu:
        for label, cpu in CPU.items():
            print(f"  CPU s, {label}: " + " ".join(f"{x:.3f}" for x in cpu))


if __name__ == "__main__":
    main()
