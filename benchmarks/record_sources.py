"""Each record source's reads against the format's own library, side by side in one run.

``--records`` records of the lengths of tokenized documents (lognormal(5, 1) tokens, uint16,
clamped to 16..1024: mean about 460 bytes), written once in each format into a temporary folder;
then, for each format, random batches of ``--batch`` record ids are read ``--rounds`` times, in
turn by the source (``gather`` into one reused buffer) and by the format's library, each
returning every record's bytes:

- token file: nanoGPT's ``get_batch`` (a ``numpy.memmap`` sliced a window at a time and
  stacked), against :class:`~coded_shuffle.records.TokenWindows` (windows of ``--block`` tokens);
- files: ``open(path, "rb").read()`` a file, against :class:`~coded_shuffle.records.FileRecords`
  (read once into one buffer; its load is timed apart);
- MDS: MosaicML Streaming's ``MDSReader`` when it imports, else the reads its
  ``get_sample_data`` makes (open the shard, read the two offsets, read the sample), against
  :class:`~coded_shuffle.records.MDSRecords`;
- WebDataset: :mod:`tarfile` (members indexed once, then ``extractfile(member).read()``), against
  :class:`~coded_shuffle.records.WebDatasetRecords` with ``member="bin"``;
- Arrow: pyarrow's ``ChunkedArray.take`` of the ids on a memory-mapped stream, against
  :class:`~coded_shuffle.records.ArrowRecords`.

Each pair alternates within a round (which goes first alternates too); a figure is the median of
the rounds, in records a second; ``ratio`` is ours / the library's (above 1: ours is faster), and
the opening time (index and map) of each is given. The bytes of both are checked equal on a batch.
Target: every ratio at least 0.5 (within 2x of the library).

Run:  python benchmarks/record_sources.py [--records 100000] [--batch 1024] [--rounds 20] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tarfile
import tempfile
import time
from collections.abc import Callable

import numpy as np

from coded_shuffle.records import ArrowRecords, FileRecords, MDSRecords, TokenWindows, WebDatasetRecords


def lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """Token counts of ``n`` documents: lognormal(5, 1), clamped to 16..1024."""
    return np.clip(np.round(rng.lognormal(5.0, 1.0, n)), 16, 1024).astype(np.int64)


def write_all(d: str, n: int, block: int, rng: np.random.Generator) -> tuple[list[bytes], int]:
    """Every format's files in ``d``; return the documents' bytes and the token file's window count."""
    docs = [rng.integers(0, 50257, int(k), dtype=np.uint16).tobytes() for k in lengths(n, rng)]
    stream = np.frombuffer(b"".join(docs), dtype=np.uint16)
    stream.tofile(os.path.join(d, "train.bin"))
    os.makedirs(os.path.join(d, "files"))
    for i, doc in enumerate(docs):
        with open(os.path.join(d, "files", f"{i:07d}.bin"), "wb") as f:
            f.write(doc)
    # MDS: one variable bytes column, shards of 2**16 samples (the writer's layout: tests/records/writers.py)
    os.makedirs(os.path.join(d, "mds"))
    text = json.dumps({"version": 2, "format": "mds"}).encode()
    shards = []
    for k, lo in enumerate(range(0, n, 1 << 16)):
        part = [np.uint32(len(x)).tobytes() + x for x in docs[lo : lo + (1 << 16)]]
        offsets = np.cumsum([0] + [len(s) for s in part]) + 4 + 4 * (len(part) + 1) + len(text)
        raw = np.uint32(len(part)).tobytes() + offsets.astype("<u4").tobytes() + text + b"".join(part)
        name = f"shard.{k:05}.mds"
        with open(os.path.join(d, "mds", name), "wb") as f:
            f.write(raw)
        shards.append({"samples": len(part), "format": "mds", "column_names": ["tokens"],
                       "column_encodings": ["bytes"], "column_sizes": [None], "compression": None,
                       "raw_data": {"basename": name, "bytes": len(raw)}, "zip_data": None})  # fmt: skip
    with open(os.path.join(d, "mds", "index.json"), "w") as f:
        json.dump({"version": 2, "shards": shards}, f)
    with tarfile.open(os.path.join(d, "data.tar"), "w", format=tarfile.USTAR_FORMAT) as tar:
        for i, doc in enumerate(docs):
            for ext, data in (("bin", doc), ("cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"{i:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    try:
        import pyarrow as pa

        col = pa.array(docs, pa.binary())
        table = pa.table({"tokens": col, "label": pa.array(np.arange(n) % 10)})
        with pa.ipc.new_stream(os.path.join(d, "data.arrow"), table.schema) as w:
            for batch in table.to_batches(max_chunksize=10_000):
                w.write_batch(batch)
    except ImportError:
        pass
    return docs, len(stream) // block


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def pair(name: str, ours_open: Callable, lib_open: Callable, ours_read: Callable, lib_read: Callable,
         N: int, batch: int, rounds: int, rng: np.random.Generator,
         lib_bytes: Callable | None = None) -> dict:  # fmt: skip
    """Open both, check one batch equal (``lib_bytes`` turns the library's batch into bytes, else
    each item is taken as bytes), then time ``rounds`` batches each, alternating."""
    t_ours, src = timed(ours_open)
    t_lib, lib = timed(lib_open)
    ids = rng.integers(0, N, batch)
    out = np.empty((batch, src.width), dtype=np.uint8)
    got = ours_read(src, ids, out)
    want = lib_read(lib, ids)
    want = lib_bytes(want) if lib_bytes is not None else [bytes(w) for w in want]
    sizes = src.sizes[ids]
    assert all(got[r, : sizes[r]].tobytes() == want[r] for r in range(batch)), name
    ours, theirs = [], []
    for r in range(rounds):
        ids = rng.integers(0, N, batch)
        for first in ((0, 1) if r % 2 == 0 else (1, 0)):
            if first == 0:
                ours.append(timed(lambda: ours_read(src, ids, out))[0])  # noqa: B023
            else:
                theirs.append(timed(lambda: lib_read(lib, ids))[0])  # noqa: B023
    a, b = batch / statistics.median(ours), batch / statistics.median(theirs)
    return {"format": name, "ours_records_s": a, "library_records_s": b, "ratio": a / b,
            "ours_open_s": t_ours, "library_open_s": t_lib,
            "mean_bytes": float(np.mean(src.sizes))}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n, B, R = args.records, args.batch, args.rounds
    gather = lambda src, ids, out: src.gather(ids, out)  # noqa: E731
    rows = []
    with tempfile.TemporaryDirectory() as d:
        t_write, (docs, windows) = timed(lambda: write_all(d, n, args.block, rng))
        block = args.block

        def nanogpt(data: np.ndarray, ids: np.ndarray) -> np.ndarray:
            return np.stack([data[i * block : (i + 1) * block] for i in ids.tolist()])  # nanoGPT's get_batch

        rows.append(pair("token file", lambda: TokenWindows(os.path.join(d, "train.bin"), block_size=block),
                         lambda: np.memmap(os.path.join(d, "train.bin"), dtype=np.uint16, mode="r"),
                         gather, nanogpt, windows, B, R, rng))  # fmt: skip
        paths = [os.path.join(d, "files", f"{i:07d}.bin") for i in range(n)]

        def read_files(paths: list[str], ids: np.ndarray) -> list[bytes]:
            out = []
            for i in ids.tolist():
                with open(paths[i], "rb") as f:
                    out.append(f.read())
            return out

        rows.append(pair("files", lambda: FileRecords(os.path.join(d, "files")), lambda: paths,
                         gather, read_files, n, B, R, rng))  # fmt: skip
        try:
            from streaming.base.format.mds.reader import MDSReader  # noqa: F401

            mds_lib = "streaming"
        except Exception:
            mds_lib = "get_sample_data's reads"

        def mds_open() -> list[tuple[str, int]]:
            with open(os.path.join(d, "mds", "index.json")) as f:
                shards = json.load(f)["shards"]
            return [(os.path.join(d, "mds", s["raw_data"]["basename"]), s["samples"]) for s in shards]

        def mds_read(shards: list[tuple[str, int]], ids: np.ndarray) -> list[bytes]:
            out = []
            for i in ids.tolist():
                path, j = shards[i >> 16][0], i & 0xFFFF
                with open(path, "rb", 0) as fp:  # as MDSReader.get_sample_data: open, two offsets, the sample
                    fp.seek((1 + j) * 4)
                    begin, end = np.frombuffer(fp.read(8), np.uint32)
                    fp.seek(begin)
                    out.append(fp.read(end - begin))
            return out

        rows.append(pair(f"MDS ({mds_lib})", lambda: MDSRecords(os.path.join(d, "mds")), mds_open,
                         gather, mds_read, n, B, R, rng))  # fmt: skip

        def tar_open() -> tuple[tarfile.TarFile, list[tarfile.TarInfo]]:
            tar = tarfile.open(os.path.join(d, "data.tar"))
            return tar, [m for m in tar.getmembers() if m.name.endswith(".bin")]

        def tar_read(lib: tuple[tarfile.TarFile, list[tarfile.TarInfo]], ids: np.ndarray) -> list[bytes]:
            tar, members = lib
            return [tar.extractfile(members[i]).read() for i in ids.tolist()]  # type: ignore[union-attr]

        wds = lambda: WebDatasetRecords(os.path.join(d, "data.tar"), member="bin")  # noqa: E731
        rows.append(pair("WebDataset tar", wds, tar_open, gather, tar_read, n, B, R, rng))
        if os.path.exists(os.path.join(d, "data.arrow")):
            import pyarrow as pa

            def arrow_open() -> object:
                mm = pa.memory_map(os.path.join(d, "data.arrow"))
                return pa.ipc.open_stream(mm).read_all().column("tokens")

            def arrow_read(col: object, ids: np.ndarray) -> object:
                return col.take(pa.array(ids))  # type: ignore[attr-defined]

            rows.append(pair("Arrow (pyarrow take)",
                             lambda: ArrowRecords(os.path.join(d, "data.arrow"), column="tokens"),
                             arrow_open, gather, arrow_read, n, B, R, rng,
                             lib_bytes=lambda taken: [x.as_py() for x in taken]))  # fmt: skip
    if args.json:
        print(json.dumps({"records": n, "batch": B, "rounds": R, "write_s": t_write, "rows": rows}, indent=1))
        return
    print(f"{n} records, batches of {B}, median of {R} rounds (files written in {t_write:.1f} s)")
    head = ["format", "ours rec/s", "library rec/s", "ratio", "open ours", "open lib"]
    print(f"{head[0]:30}" + "".join(f"{h:>14}" for h in head[1:]))
    for r in rows:
        vals = [f"{r['ours_records_s']:.3g}", f"{r['library_records_s']:.3g}", f"{r['ratio']:.2f}",
                f"{r['ours_open_s']:.3f} s", f"{r['library_open_s']:.3f} s"]  # fmt: skip
        print(f"{r['format']:30}" + "".join(f"{v:>14}" for v in vals))


if __name__ == "__main__":
    main()
