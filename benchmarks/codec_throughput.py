"""Codec throughput against the memory-bandwidth floor of ``np.copyto``, in the same run.

For each record size (64 B, 4 KiB, 1 MiB) a dataset of about ``--mib`` MiB is planned for one
transition of ``--workers`` workers, then:

- encode: :func:`coded_shuffle.codec.encode_plan` (frames with headers, every XOR symbol),
  throughput = symbol payload bytes / seconds;
- decode: :func:`coded_shuffle.codec.decode_worker` for every worker, without checksums,
  throughput = bytes of decoded records / seconds (peeling of the cycles included);
- verify: checksums of the decoded records (:func:`coded_shuffle.codec.record_checksums`);
- copy: ``np.copyto`` of as many bytes as the encode (resp. decode) produced, between two
  pre-touched buffers: the floor every ratio is measured against.

Each figure is the best of ``--repeat`` runs. Target: encode and decode each at least 0.5 of the
copy bandwidth for records of 4 KiB and more.

Run:  python benchmarks/codec_throughput.py [--mib 256] [--workers 8] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from coded_shuffle.codec import decode_worker, encode_plan, load_dataset, parse_frame, record_checksums
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery

SIZES = (64, 4096, 1 << 20)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tic)
    return min(times)


def copy_seconds(nbytes: int, repeat: int) -> float:
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.ones(nbytes, dtype=np.uint8)
    return best(lambda: np.copyto(dst, src), repeat)


def measure(B: int, mib: int, K: int, repeat: int, seed: int) -> dict:
    N = max(K * 4, (mib << 20) // B)
    rng = np.random.default_rng(seed)
    ds = load_dataset(rng.integers(0, 256, size=(N, B), dtype=np.uint8), checksums=False)
    p0 = epoch_placement(N, K, seed=seed, epoch=0)
    p1 = epoch_placement(N, K, seed=seed, epoch=1)
    plan = plan_delivery(p0, p1)

    frames: list = []
    t_enc = best(lambda: frames.__setitem__(slice(None), encode_plan(plan, ds, epoch=1)), repeat)
    parsed = [parse_frame(f) for f in frames]
    enc_bytes = sum(f.payload_bytes for f in parsed)
    c_enc = copy_seconds(enc_bytes, repeat)

    caches = [ds.cache(p0.batch(k)) for k in range(K)]
    needs = [p1.batch(k) for k in range(K)]
    results: list = []
    # Steady state: each worker double-buffers its cache, so the new records go to a buffer
    # already in use (that of epoch t - 1), like the copy's destination.
    outs = [np.ones((needs[k].size, B), dtype=np.uint8) for k in range(K)]

    def decode_all() -> None:
        results[:] = [
            decode_worker(caches[k], parsed, need=needs[k], worker=k, out=outs[k]) for k in range(K)
        ]

    t_dec = best(decode_all, repeat)
    dec_bytes = sum(int(r.decoded.size) for r in results) * B
    c_dec = copy_seconds(dec_bytes, repeat)
    decoded_rows = np.concatenate([r.cache.data[r.cache.rows(r.decoded)] for r in results])
    t_ver = best(lambda: record_checksums(decoded_rows), repeat)
    for k, r in enumerate(results):
        assert np.array_equal(r.cache.data, np.asarray(ds.data)[needs[k]])
    GB = 1e9
    return {
        "record_bytes": B,
        "N": N,
        "K": K,
        "symbols": plan.n_symbols,
        "encode_GBps": enc_bytes / t_enc / GB,
        "encode_copy_GBps": enc_bytes / c_enc / GB,
        "encode_ratio": c_enc / t_enc,
        "decode_GBps": dec_bytes / t_dec / GB,
        "decode_copy_GBps": dec_bytes / c_dec / GB,
        "decode_ratio": c_dec / t_dec,
        "verify_GBps": dec_bytes / t_ver / GB,
        "framing_overhead": sum(f.header_bytes for f in parsed) / enc_bytes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="dataset size in MiB per record size")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [measure(B, args.mib, args.workers, args.repeat, args.seed) for B in args.sizes]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"dataset ~{args.mib} MiB per size, K = {args.workers}, best of {args.repeat}")
    head = ("record", "symbols", "encode GB/s", "copy GB/s", "ratio", "decode GB/s", "copy GB/s", "ratio",
            "verify GB/s", "framing")  # fmt: skip
    print("{:>8} {:>8} {:>11} {:>9} {:>6} {:>11} {:>9} {:>6} {:>11} {:>8}".format(*head))
    for r in rows:
        print(
            f"{r['record_bytes']:>8} {r['symbols']:>8} {r['encode_GBps']:>11.2f} "
            f"{r['encode_copy_GBps']:>9.2f} "
            f"{r['encode_ratio']:>6.2f} {r['decode_GBps']:>11.2f} {r['decode_copy_GBps']:>9.2f} "
            f"{r['decode_ratio']:>6.2f} {r['verify_GBps']:>11.2f} {r['framing_overhead']:>8.2%}"
        )


if __name__ == "__main__":
    main()
