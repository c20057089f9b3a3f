"""A worker's cache file of records of many sizes: version 3 (the records end to end) against
version 2 (each record a row zero-padded to the widest), side by side in one run.

The records: ``--records`` token documents of lognormal(5, 1) uint16 tokens clamped to 16..1024
(mean about 457 B, longest 2,048 B; those of ``benchmarks/variable_coding.py``), random bytes
(seed 2); the cache: worker 0's batch of epoch 0 at ``K = 8``, packed, as a worker decodes it.

- **version 3**: :func:`~coded_shuffle.engine.cache_dir.save_cache` of that cache, then
  :func:`~coded_shuffle.engine.cache_dir.load_cache` of its file;
- **version 2**: the same records in the layout the writer used before version 3 (the module
  docstring's table: each row the record's bytes, zeros to the widest), written here with
  ``struct`` and numpy and ``fsync``-ed as the writer does, then read by the same ``load_cache``
  (which still reads version 2).

Each load checks every record's checksum. Seconds: wall clock, the fastest of ``--repeats``; the
files go to a temporary folder under ``--dir`` (default: the system's).

Run:  python benchmarks/cache_files.py [--records 100000] [--repeats 5] [--dir PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine.cache_dir import cache_path, dataset_fingerprint, load_cache, save_cache
from coded_shuffle.orders import epoch_placement

K = 8


def version_2_file(path: Path, ds, cache) -> None:
    """``cache`` written as a version 2 file: the header, the tables, each row zero-padded."""
    ids, lengths, width = cache.ids, np.asarray(cache.lengths, dtype="<i8"), ds.record_bytes
    tables = ids.astype("<i8").tobytes() + ds.checksums[ids].astype("<u8").tobytes() + lengths.tobytes()
    rows_at = -(-(112 + len(tables)) // 64) * 64
    digest = hashlib.blake2b(tables, digest_size=16).digest()
    head = struct.pack("<8sIIQQQQQ16s16sQ", b"CSCACHE\x00", 2, 0, ds.N, width, len(ids), 0, 2**64 - 1,
                       dataset_fingerprint(ds), digest, rows_at)  # fmt: skip
    head += hashlib.blake2b(head, digest_size=16).digest()
    with open(path, "wb") as f:
        f.write(head + tables + b"\x00" * (rows_at - 112 - len(tables)))
        f.write(cache.data.data)  # the rows, zero-padded (a packed cache's copy)
        f.flush()
        os.fsync(f.fileno())


def fastest(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - tic)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = 2 * np.clip(np.round(rng.lognormal(5.0, 1.0, args.records)), 16, 1024).astype(np.int64)
    blob = np.random.default_rng(2).integers(0, 256, int(sizes.sum()), dtype=np.uint8).tobytes()
    ends = np.cumsum(sizes).tolist()
    ds = load_dataset([blob[e - n : e] for e, n in zip(ends, sizes.tolist(), strict=True)])
    cache = ds.cache(epoch_placement(args.records, K, seed=0, epoch=0).batch(0), packed=True)
    n, total = len(cache), int(np.sum(cache.lengths))
    print(f"worker 0 of K = {K}: {n} records, {total:,} B, the widest {ds.record_bytes} B", flush=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        v3, v2 = cache_path(d, 0), Path(d) / "version-2.cache"
        rows = {}
        for name, path, write in (
            ("version 3", v3, lambda: save_cache(v3, cache, ds, epoch=0, worker=0)),
            ("version 2", v2, lambda: version_2_file(v2, ds, cache)),
        ):
            w = fastest(write, args.repeats)
            r = fastest(lambda p=path: load_cache(p, ds), args.repeats)
            got = load_cache(path, ds)
            assert got.dropped == 0 and np.array_equal(got.cache.ids, cache.ids)
            some = cache.ids[:: max(1, n // 500)].tolist()
            assert [got.cache.record(i) for i in some] == [cache.record(i) for i in some]
            size = os.path.getsize(path)
            rows[name] = (size, w, r)
            print(f"  {name}: file {size:,} B ({size / total:.3f} x the records), written in "
                  f"{w * 1e3:.1f} ms, read and checked in {r * 1e3:.1f} ms", flush=True)  # fmt: skip
    (s3, w3, r3), (s2, w2, r2) = rows["version 3"], rows["version 2"]
    print(f"  version 3 / version 2: file {s3 / s2:.3f}, write {w3 / w2:.3f}, read {r3 / r2:.3f}", flush=True)


if __name__ == "__main__":
    main()
