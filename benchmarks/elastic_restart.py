"""The first transition after a restart, from the caches the hosts kept on disk, against a cold
start; and transitions from ``K`` to ``K'`` workers against the bound of their rectangular
shuffle. In process, one run, side by side. Part 1: for ``K`` in ``--workers``, every worker's
cache of epoch ``t`` is written to a folder
(:func:`coded_shuffle.engine.cache_dir.save_cache_dir`); the restarted job's first transition to
epoch ``t + 1`` (:func:`coded_shuffle.engine.elastic.restart_transition`: read the files, check
every record, deliver) is timed beside the same transition from an empty folder (a cold start:
every batch from the source), in the coded mode (the master's bytes) and the exchange (bytes from
the source and from peers); then a job storing ``--storage`` batches restarted with every file,
with one host lost (its storage comes back from its peers) and with none. In process no network
carries the bytes, so the seconds are those of the CPU (reading and checking the files, planning,
decoding); beside them, the time the bytes take on links of ``--link-mbps``: the master's
broadcast, or in the exchange the busier of the source's link and the busiest worker's download.
Part 2: ``8 -> 6`` and ``6 -> 8`` workers (the leavers' caches gone, the joiners empty), the coded
load against the genie bound of the ``K x K'`` shuffle and against the uncoded load, and the
exchange's bytes from the source and from peers.

Run:  python benchmarks/elastic_restart.py [--mib 64] [--record-bytes 4096] [--workers 4,8]
      [--link-mbps 1000] [--storage 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from coded_shuffle.engine import initial_caches, synthetic_dataset
from coded_shuffle.engine.cache_dir import save_cache_dir
from coded_shuffle.engine.elastic import elastic_run, restart_transition
from coded_shuffle.engine.recover import save_storage, storage_restart
from coded_shuffle.orders import epoch_placement


def _mb(n: int) -> str:
    return f"{n / 1e6:9.2f}"


def _link_seconds(rep, mbps: float) -> float:
    """The transition's time on links of ``mbps``: the master's broadcast, or in an exchange the
    busier of the source's link and the busiest worker's download."""
    if rep.mode != "exchange":
        return rep.transition.wire_bytes * 8 / (mbps * 1e6)
    return max(rep.source_bytes, rep.transition.download_bound_bytes) * 8 / (mbps * 1e6)


def restarts(ds, Ks: list[int], seed: int, mbps: float) -> None:
    link = f"s @{mbps:g}M"
    print(f"{'K':>3} {'mode':>8} {'start':>5} {'source MB':>9} {'peers MB':>9} {'master MB':>9} "
          f"{'seconds':>8} {link:>9}")  # fmt: skip
    for K in Ks:
        p3, p4 = (epoch_placement(ds.N, K, seed=seed, epoch=t) for t in (3, 4))
        with tempfile.TemporaryDirectory() as folder:
            tic = time.perf_counter()
            save_cache_dir(folder, initial_caches(ds, p3), ds, epoch=3, seed=seed)
            saved = time.perf_counter() - tic
            for mode in ("coded", "exchange"):
                row = {}
                for start, where in (("warm", folder), ("cold", str(Path(folder) / "none"))):
                    tic = time.perf_counter()
                    rep, _, notes = restart_transition(ds, where, p4, epoch=4, seed=seed, mode=mode)
                    secs = time.perf_counter() - tic
                    assert rep.verified and len(notes) == (start == "cold")  # cold: "no such folder"
                    master = rep.transition.wire_bytes
                    on_link = _link_seconds(rep, mbps)
                    row[start] = (rep.source_bytes + rep.peer_bytes + master, secs, on_link)
                    print(f"{K:>3} {mode:>8} {start:>5} {_mb(rep.source_bytes)} {_mb(rep.peer_bytes)} "
                          f"{_mb(master)} {secs:8.3f} {on_link:9.3f}")  # fmt: skip
                (wb, ws, wl), (cb, cs, cl) = row["warm"], row["cold"]
                print(f"{'':>3} {mode:>8} warm/cold: bytes {wb / cb:.3f}, in-process time {ws / cs:.3f}, "
                      f"on the links {wl / cl:.3f}")  # fmt: skip
        print(f"{'':>3} writing the {K} cache files: {saved:.3f} s")


def storage_restarts(ds, Ks: list[int], seed: int, M: int) -> None:
    """A job storing ``M`` batches restarted at epoch 3: every file kept, one host lost, none kept."""
    print(f"{'K':>3} {'M':>2} {'files':>9} {'source MB':>9} {'peers MB':>9} {'master MB':>9} {'seconds':>8}")
    for K in Ks:
        with tempfile.TemporaryDirectory() as folder:
            save_storage(folder, ds, K=K, M=M, seed=seed, epoch=3)
            for files in ("all", "one lost", "none"):
                if files == "one lost":
                    os.remove(os.path.join(folder, "worker-0.cache"))
                where = folder if files != "none" else os.path.join(folder, "none")
                tic = time.perf_counter()
                rep, _ = storage_restart(ds, where, K=K, M=M, seed=seed, epoch=3)
                secs = time.perf_counter() - tic
                assert rep.verified
                print(f"{K:>3} {M:>2} {files:>9} {_mb(rep.source_bytes)} {_mb(rep.peer_bytes)} "
                      f"{_mb(rep.transition.wire_bytes)} {secs:8.3f}")  # fmt: skip


def transitions(ds, seed: int) -> None:
    print(f"{'K -> K':>7} {'mode':>8} {'symbols':>8} {'bound':>7} {'/bound':>7} {'uncoded':>8} "
          f"{'source MB':>9} {'peers MB':>9}")  # fmt: skip
    for Ks in ([8, 6], [6, 8]):
        for mode in ("coded", "uncoded", "exchange"):
            (rep,) = elastic_run(ds, workers=Ks, seed=seed, mode=mode, start_epoch=3)
            assert rep.verified
            t = rep.transition
            print(f"{Ks[0]:>2} -> {Ks[1]:<2} {mode:>8} {rep.symbols:>8} {rep.bound:>7} "
                  f"{rep.symbols / rep.bound:>7.3f} {t.uncoded_symbols:>8} {_mb(rep.source_bytes)} "
                  f"{_mb(rep.peer_bytes)}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64)
    ap.add_argument("--record-bytes", type=int, default=4096)
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--link-mbps", type=float, default=1000)
    ap.add_argument("--storage", type=int, default=2, help="M of the restarts with storage (1: none)")
    args = ap.parse_args()
    N = int(args.mib * (1 << 20)) // args.record_bytes
    ds = synthetic_dataset(N, args.record_bytes, seed=args.seed)
    print(f"N = {N}, record = {args.record_bytes} B, dataset {N * args.record_bytes / 2**20:.1f} MiB, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    small = synthetic_dataset(64, 64, seed=0)  # one-time costs (compiled kernels) before the clock
    with tempfile.TemporaryDirectory() as folder:
        for mode in ("coded", "exchange"):
            restart_transition(small, folder, epoch_placement(64, 4, seed=0, epoch=1), epoch=1, mode=mode)
        if args.storage > 1:
            storage_restart(synthetic_dataset(64, 4096, seed=0), folder, K=4, M=args.storage, seed=0, epoch=1)
    restarts(ds, [int(k) for k in args.workers.split(",")], args.seed, args.link_mbps)
    Ks = [int(k) for k in args.workers.split(",")]
    if args.storage > 1:
        storage_restarts(ds, Ks, args.seed, args.storage)
    transitions(ds, args.seed)


if __name__ == "__main__":
    main()
